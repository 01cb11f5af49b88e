"""PUAT (Zhang, Yang, Sun & Yu, TPAMI 2024): provable unrestricted adversarial training.

Four players: classifier C, conditional generator G(z, y), discriminator D(x, y), latent attacker A.
An unrestricted adversarial example (UAE) is an imperceptibly perturbed *unobserved* example:
    x_a = Pi_{B_eps(G(z,y))} G(A(z, y), y),   A(z, y) = z + latent_eps * tanh(f(z, y)),
z ~ N(0, I), y ~ U{classes}; Pi clips to the L-inf eps-ball around G(z, y) and to [0,1].
G, C and D play the augmented Triple-GAN game (hinge form), alpha (gan_alpha) mixing C's and
G's fake pairs; real pairs are labelled (x, y) and unlabelled (x, argmax C(x)):
    L_D = E_real relu(1 - D(x,y)) + alpha E_{x~U} sum_y p_C(y|x) relu(1 + D(x,y))
          + (1 - alpha) E_{z,y} relu(1 + D(G(z,y), y))                     (d_steps Adam steps)
    L_G = -E_{z,y} D(G(z,y), y)                                              (one Adam step)
    L_A = -E_{z,y} CE(C(x_a), y)              (A maximises C's loss on UAEs; one Adam step)
C's loss (returned; the trainer steps C): the supervised loss inside the adversarial game, Mean
Teacher consistency, C's side of the game and conventional L-inf AT on restricted AEs (RAEs):
    L_C = CE_ls(C(x_l), y_l) + w(t) MSE(softmax C(x), softmax C_ema(x))
          + r(t) [ uae_weight CE_ls(C(x_a), y) - gan_weight E_{x~U} sum_y p_C(y|x) D(x,y)
                   + rae_weight CE_ls(C(x_rae), y_hat) ],
x_rae = PGD on CE in B_eps(x) (the run's threat model, start x + 0.001 N(0,I)); y_hat = y for
labelled samples, argmax C(x) (detached) for unlabelled ones. w(t) = consistency exp(-5(1-t)^2)
over consistency_rampup_epochs; r(t) the same ramp over adv_rampup_epochs after pre-training.
Pre-training (progress < pretrain_epochs): C by CE_ls + consistency (Mean Teacher); D and G play
from gan_start_epochs; A and the r(t) terms are off. Then the full game. D and A are updated with
C in eval mode, before C's loss of the same step.

The terms, their order and the defaults are the authors' released code (zhang-lilin/PUAT; facts
read off it, nothing copied): the paper's full text was not at hand, and its abstract's account
(augmented Triple-GAN, UAEs from an attacker and a generator, the supervised loss inside the
adversarial loss) matches the code. Code defaults (its CIFAR-10 and ImageNet32 configs;
CIFAR-100's consistency 500, RAE 100 and gan_weight 0.03 are params.yaml's per_dataset entry):
gan_alpha 0.5, 5 D steps per C step, Adam lr 1e-4 betas (0, 0.99), latent_eps 0.1, UAE weight
10, RAE weight 10 * 6 = 60, gan_weight 1, consistency 50, label smoothing 0.1. Departures
(docs/methods.md lists them):
- one run, one SGD schedule: pre-training is the first pretrain_epochs of the run (the code: a
  100-epoch pre-training run, then a 100-epoch run with a fresh SGD optimiser and schedule);
- D's steps reuse the step's batch (fresh split and z each), not fresh data batches; real pairs
  are the labelled samples + the unlabelled ones whose coin (Bernoulli 1/2) falls 1, C's pairs
  the rest (the code: 10% labelled + 90% pseudo-labelled real pairs, C's pairs another batch);
- G's labels y ~ uniform (the code: the labelled batch's labels; class-balanced there too);
- one natural forward for the whole batch; consistency and RAEs on the whole batch (the code: a
  10%/90% labelled/unlabelled sub-batch); the teacher is the trainer's EMA in eval mode, on the
  same augmented view (the code: no augmentation, teacher in train mode);
- D's step scores the un-augmented batch (x_raw, with C's eval-mode probabilities on it), while
  C's GAN term scores the augmented batch with the same D (the code augments nothing, so there
  the two coincide);
- C's BatchNorm running statistics see natural images and RAEs only: UAEs (generated) and the
  PGD iterates use batch statistics with frozen running statistics (the code lets all update them);
- A is an MLP on [z, onehot(y)] (the code: a small conv net with conditional BN); the UAE's image
  ball is the run's eps (the code: a fixed 8/255). GAN sizes are knobs (gan.py sizes the nets).
On the embedded digits default (params.yaml) the scale differs, measured there: the adversarial
weights are the code's divided by 10 (uae 1, rae 6, gan 0.1: the code's 10, 60, 1 drive the small
CNN to constant predictions), gan_lr 2e-3 (about 470 G steps, one a step from the second epoch
on, instead of about 10^4: at 1e-4 G ignores y), 10 pre-training epochs then 30 of the full game
(digits trains 40), G/D width 16, latent 32, 64 generated per step.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from wscat.attacks import frozen_batchnorm_stats, pgd
from wscat.losses import consistency_mse, cross_entropy
from wscat.methods.base import Batch, Method, StepContext, sigmoid_rampup
from wscat.models.gan import Attacker, Discriminator, Generator
from wscat.optim import Adam

ADAM_BETAS = (0.0, 0.99)  # the released code's Adam betas for G, D and A


def project(x_uae: torch.Tensor, x_g: torch.Tensor, eps: float) -> torch.Tensor:
    """Clip a UAE to the L-inf eps-ball around the unperturbed G(z, y), and to [0,1]."""
    return torch.min(torch.max(x_uae, x_g - eps), x_g + eps).clamp(0.0, 1.0)


def weighted_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean over the rows with weight 1 (masked arithmetic: no host synchronisation on a GPU)."""
    return (values * weights).sum() / weights.sum().clamp(min=1)


def pair_roles(labels: torch.Tensor, coin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """0/1 weights of the batch rows as real pairs and as C's pairs: labelled rows are real; an
    unlabelled row is real (labelled argmax C(x)) where its coin is 1, C's pair where it is 0.
    Without unlabelled rows, C's pairs are the labelled rows (the released code)."""
    labelled = (labels >= 0).to(coin.dtype)
    unlabelled = 1.0 - labelled
    any_unlabelled = (unlabelled.sum() > 0).to(coin.dtype)
    real = labelled + unlabelled * coin
    classifier = any_unlabelled * unlabelled * (1.0 - coin) + (1.0 - any_unlabelled) * labelled
    return real, classifier


def discriminator_loss(scores: torch.Tensor, y_real: torch.Tensor, real_weight: torch.Tensor,
                       probs: torch.Tensor, classifier_weight: torch.Tensor,
                       scores_generated: torch.Tensor, y_generated: torch.Tensor, alpha: float
                       ) -> torch.Tensor:
    """L_D (hinge Triple-GAN). scores = D(x, .) for every class (B x K) of the batch, whose rows are
    real pairs (x, y_real) or C's pairs (x, y ~ probs) by their weights; generated pairs apart."""
    real = weighted_mean(F.relu(1.0 - scores.gather(1, y_real[:, None]).squeeze(1)), real_weight)
    classifier = weighted_mean((F.relu(1.0 + scores) * probs).sum(1), classifier_weight)
    generated = F.relu(1.0 + scores_generated.gather(1, y_generated[:, None])).mean()
    return real + alpha * classifier + (1.0 - alpha) * generated


def classifier_gan_loss(logits: torch.Tensor, scores: torch.Tensor, weight: torch.Tensor
                        ) -> torch.Tensor:
    """C's side of the game: -E_x sum_y p_C(y|x) D(x, y) over C's pairs, D's scores fixed."""
    return -weighted_mean((F.softmax(logits, dim=1) * scores.detach()).sum(1), weight)


def _adam_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor,
               parameters: list[nn.Parameter]) -> None:
    """Step one player on `loss`; gradients reach only its own parameters (never C's)."""
    grads = torch.autograd.grad(loss, parameters)
    for parameter, grad in zip(parameters, grads):
        parameter.grad = grad
    optimizer.step()
    for parameter in parameters:
        parameter.grad = None


class Puat(Method):
    def __init__(self, *, num_classes: int, image_shape: tuple[int, int, int], feature_dim: int,
                 pretrain_epochs: float, gan_start_epochs: float, adv_rampup_epochs: float,
                 consistency: float, consistency_rampup_epochs: float, uae_weight: float,
                 rae_weight: float, gan_weight: float, gan_alpha: float, label_smoothing: float,
                 d_steps: int, n_generated: int, latent_dim: int, gan_width: int,
                 latent_eps: float, gan_lr: float) -> None:
        super().__init__()
        del feature_dim  # PUAT uses only C's logits
        self.num_classes, self.latent_dim, self.n_generated = num_classes, latent_dim, n_generated
        self.pretrain_epochs, self.gan_start_epochs = pretrain_epochs, gan_start_epochs
        self.adv_rampup_epochs, self.consistency = adv_rampup_epochs, consistency
        self.consistency_rampup_epochs = consistency_rampup_epochs
        self.uae_weight, self.rae_weight, self.gan_weight = uae_weight, rae_weight, gan_weight
        self.gan_alpha, self.label_smoothing, self.d_steps = gan_alpha, label_smoothing, d_steps
        self.generator = Generator(image_shape, num_classes, latent_dim=latent_dim, width=gan_width)
        self.discriminator = Discriminator(image_shape, num_classes, width=gan_width)
        self.attacker = Attacker(latent_dim, num_classes, latent_eps=latent_eps, hidden=latent_dim)
        self.optimizers = {name: Adam(getattr(self, name).parameters(), lr=gan_lr,
                                      betas=ADAM_BETAS)
                           for name in ("generator", "discriminator", "attacker")}

    # The trainer's optimiser steps C only; G, D and A are stepped here with their own Adams.
    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        return iter(())

    def get_extra_state(self) -> dict[str, Any]:
        return {name: optimizer.state_dict() for name, optimizer in self.optimizers.items()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """The Adams' states; each parameter's `step` back in the form a fresh Adam keeps it, a
        CPU scalar. A resume maps the checkpoint onto the device, and torch leaves `step` where
        it finds it: on a GPU every Adam step would then read each parameter's count back to
        the host (same numbers, one wait per parameter)."""
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state[name])
            for entry in optimizer.state.values():
                if isinstance(entry.get("step"), torch.Tensor):
                    entry["step"] = torch.tensor(float(entry["step"]))

    def consistency_weight(self, progress: float) -> float:
        if self.consistency_rampup_epochs == 0:
            return self.consistency
        return self.consistency * sigmoid_rampup(progress / self.consistency_rampup_epochs)

    def adversarial_ramp(self, progress: float) -> float:
        """r(t): 0 during pre-training, then the sigmoid ramp to 1."""
        if progress < self.pretrain_epochs:
            return 0.0
        if self.adv_rampup_epochs == 0:
            return 1.0
        return sigmoid_rampup((progress - self.pretrain_epochs) / self.adv_rampup_epochs)

    def sample_latent(self, n: int, ctx: StepContext, device: torch.device
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        g = ctx.generator
        z = torch.randn(n, self.latent_dim, generator=g, device=g.device).to(device)
        y = torch.randint(self.num_classes, (n,), generator=g, device=g.device).to(device)
        return z, y

    def unrestricted(self, z: torch.Tensor, y: torch.Tensor, eps: float) -> torch.Tensor:
        """x_a = Pi_{B_eps(G(z,y))} G(A(z,y), y); differentiable in A (and G) only."""
        with torch.no_grad():
            x_g = self.generator(z, y)
        return project(self.generator(self.attacker(z, y), y), x_g, eps)

    def update_players(self, model: nn.Module, batch: Batch, ctx: StepContext, adversarial: bool
                       ) -> dict[str, torch.Tensor]:
        """d_steps steps of D, one of G and (after pre-training) one of A, C in eval mode."""
        device, g = batch.x.device, ctx.generator
        model.eval()
        with torch.no_grad():
            probs = F.softmax(model(batch.x_raw)[1].float(), dim=1)
        y_real = torch.where(batch.labels >= 0, batch.labels, probs.argmax(1))
        d_params, d_loss = list(self.discriminator.parameters()), torch.zeros((), device=device)
        for _ in range(self.d_steps):
            coin = torch.rand(len(probs), generator=g, device=g.device) < 0.5
            coin = coin.to(device, probs.dtype)
            real_weight, classifier_weight = pair_roles(batch.labels, coin)
            z, y = self.sample_latent(self.n_generated, ctx, device)
            with torch.no_grad():
                x_gen = self.generator(z, y)
            scores = self.discriminator.scores(torch.cat([batch.x_raw, x_gen]))
            s_batch, s_gen = scores.split([len(batch.x_raw), len(x_gen)])
            d_loss = discriminator_loss(s_batch, y_real, real_weight, probs, classifier_weight,
                                        s_gen, y, self.gan_alpha)
            _adam_step(self.optimizers["discriminator"], d_loss, d_params)
        z, y = self.sample_latent(self.n_generated, ctx, device)
        g_loss = -self.discriminator(self.generator(z, y), y).mean()
        _adam_step(self.optimizers["generator"], g_loss, list(self.generator.parameters()))
        a_loss = torch.zeros((), device=device)
        if adversarial:
            z, y = self.sample_latent(self.n_generated, ctx, device)
            a_loss = -F.cross_entropy(model(self.unrestricted(z, y, ctx.eps))[1], y)
            _adam_step(self.optimizers["attacker"], a_loss, list(self.attacker.parameters()))
        model.train()
        return {"d_loss": d_loss.detach(), "g_loss": g_loss.detach(), "a_loss": a_loss.detach()}

    def adversarial_terms(self, model: nn.Module, batch: Batch, logits: torch.Tensor,
                          ctx: StepContext) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """C's UAE loss, its side of the Triple-GAN game and its RAE (PGD) loss."""
        z, y = self.sample_latent(self.n_generated, ctx, batch.x.device)
        with torch.no_grad():
            x_uae = self.unrestricted(z, y, ctx.eps)
        with frozen_batchnorm_stats(model):  # generated images stay out of C's BN statistics
            uae = cross_entropy(model(x_uae)[1], y, self.label_smoothing)

        _, weight = pair_roles(batch.labels, torch.zeros_like(logits[:, 0], dtype=torch.float32))
        training = self.discriminator.training
        self.discriminator.eval()  # no spectral-norm power iteration: C's term leaves D as it is
        with torch.no_grad():
            scores = self.discriminator.scores(batch.x)
        self.discriminator.train(training)
        gan = classifier_gan_loss(logits, scores, weight)

        targets = torch.where(batch.labels >= 0, batch.labels, logits.argmax(1)).detach()
        with frozen_batchnorm_stats(model):
            x_rae = pgd(lambda x: F.cross_entropy(model(x)[1], targets, reduction="sum"), batch.x,
                        eps=ctx.eps, step_size=ctx.step_size, steps=ctx.steps,
                        random_start="normal", generator=ctx.generator)
        # the RAE forward updates the running statistics, as conventional AT does
        rae = cross_entropy(model(x_rae)[1], targets, self.label_smoothing)
        return uae, gan, rae

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        ramp = self.adversarial_ramp(ctx.progress)
        zero = torch.zeros((), device=batch.x.device)
        stats = {"d_loss": zero, "g_loss": zero, "a_loss": zero}
        if ctx.progress >= self.gan_start_epochs:
            stats = self.update_players(model, batch, ctx, adversarial=ramp > 0)

        model.train()
        _, logits = model(batch.x)
        ce = cross_entropy(logits, batch.labels, self.label_smoothing)
        ctx.ema_model.eval()
        with torch.no_grad():
            _, logits_teacher = ctx.ema_model(batch.x)
        consistency = consistency_mse(logits, logits_teacher)
        loss = ce + self.consistency_weight(ctx.progress) * consistency
        uae = gan = rae = zero
        if ramp > 0:
            uae, gan, rae = self.adversarial_terms(model, batch, logits, ctx)
            loss = loss + ramp * (self.uae_weight * uae + self.gan_weight * gan
                                  + self.rae_weight * rae)
        return loss, {"ce": ce.detach(), "consistency": consistency.detach(), "uae": uae.detach(),
                      "gan": gan.detach(), "rae": rae.detach(), **stats}
