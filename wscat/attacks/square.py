"""Square Attack (Andriushchenko et al., ECCV 2020), L-inf, as pyautoattack runs it, without the
queries whose answer is already known.

In pyautoattack's L-inf loop every query draws one window (place and sign, shared by the batch) and
evaluates the model on `x_new` for every point still correctly classified. Late in the schedule the
window is a single pixel, and for about half of the points that pixel already holds the drawn
value: `x_new` is bit for bit `x_best`, and the library evaluates the model on a point whose margin
and loss it already holds, only to keep them (its update `i * new + (1 - i) * old` with i = 0).
`FastSquareAttack` evaluates the model on the changed points only and gives the others the values
the library would have computed, so every draw of the random stream, every margin, every accepted
window and every returned image stays the same, provided the model's output for one example does not
depend on the other examples in its batch. That holds for a model in eval mode on the CPU kernels
tested here, but batch size 1 and some GPU algorithms break it, so it is checked on the examples
themselves before each run, and the library's own loop runs where it does not hold.

An upstream patch would add the same skip to `SquareAttack.attack_single_run` (L-inf branch).
`tests/unit/test_square.py` compares this class with the library's, bit for bit, on random models
and inputs and on a trained model.
"""
from __future__ import annotations

import math

import torch
from pyautoattack.square import SquareAttack


def batch_independent(predict, x: torch.Tensor) -> bool:
    """True if `predict` gives the examples of `x` the same logits in three sub-batches (every
    other one, about half; the first 2; all but the first, len(x) - 1) as in the whole batch.
    The loop evaluates sub-batches of any size from 2 up, so this samples the sizes, it does
    not prove them: a GPU whose kernels change at an unchecked size would slip through (on the
    H100 the AutoAttack flags matched the library's for all 1,000 proxy test images:
    benchmarks/results/autoattack-speed-h100.md)."""
    n = len(x)
    if n < 3:
        return n < 2  # one example: nothing to skip; two: the pair is the only sub-batch >= 2
    with torch.no_grad():
        full = predict(x)
        picks = [torch.arange(n - 1, -1, -2), torch.arange(0, 2), torch.arange(1, n)]
        return all(torch.equal(predict(x[p]), full[p]) for p in picks)


class FastSquareAttack(SquareAttack):
    """pyautoattack's SquareAttack; its L-inf loop evaluates only the points a query changes."""

    @classmethod
    def like(cls, square: SquareAttack) -> "FastSquareAttack":
        """This class with every setting of `square` (as AutoAttack's version set them)."""
        fast = cls.__new__(cls)
        fast.__dict__.update(vars(square))
        return fast

    def attack_single_run(self, x: torch.Tensor, y: torch.Tensor):
        if self.norm != "Linf" or not batch_independent(self.predict, x):
            return super().attack_single_run(x, y)
        return self._linf_run(x, y)

    def _margin_and_loss_of_changed(self, x_new: torch.Tensor, y_curr: torch.Tensor,
                                    changed: torch.Tensor, margin_old: torch.Tensor,
                                    loss_old: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The library's `margin_and_loss(x_new, y_curr)`: computed for the changed points, the
        held values for the others (the same numbers, as the model is batch-independent)."""
        margin, loss = margin_old.clone(), loss_old.clone()
        index = changed.nonzero().flatten()
        if len(index) == 0:
            return margin, loss
        if len(index) == 1 and len(x_new) > 1:
            # A batch of one may take other kernels than the library's batch: evaluate a pair.
            partner = (index + 1) % len(x_new)
            m, l = self.margin_and_loss(x_new[torch.cat([index, partner])],
                                        y_curr[torch.cat([index, partner])])
            margin[index], loss[index] = m[:1], l[:1]
            return margin, loss
        m, l = self.margin_and_loss(x_new[index], y_curr[index])
        margin[index], loss[index] = m, l
        return margin, loss

    def _linf_run(self, x: torch.Tensor, y: torch.Tensor):
        """pyautoattack 0.2.0's L-inf `attack_single_run`, statement for statement, with the
        model evaluated on the changed points only."""
        with torch.no_grad():
            c, h, w = x.shape[1:]
            n_features = c * h * w
            n_ex_total = x.shape[0]

            x_best = torch.clamp(x + self.eps * self.random_choice([x.shape[0], c, 1, w]), 0., 1.)
            margin_min, loss_min = self.margin_and_loss(x_best, y)
            n_queries = torch.ones(x.shape[0]).to(self.device)

            if (margin_min < 0.0).all():
                return n_queries, x_best

            for i_iter in range(self.n_queries):
                idx_to_fool = (margin_min > 0.0).nonzero().squeeze()

                x_curr = self.check_shape(x[idx_to_fool])
                x_best_curr = self.check_shape(x_best[idx_to_fool])
                y_curr = y[idx_to_fool]
                if len(y_curr.shape) == 0:
                    y_curr = y_curr.unsqueeze(0)
                margin_min_curr = margin_min[idx_to_fool]
                loss_min_curr = loss_min[idx_to_fool]

                p = self.p_selection(i_iter)
                s = max(int(round(math.sqrt(p * n_features / c))), 1)
                s = min(s, min(h, w))
                vh = self.random_int(0, h - s)
                vw = self.random_int(0, w - s)
                new_deltas = torch.zeros([c, h, w]).to(self.device)
                new_deltas[:, vh:vh + s, vw:vw + s] = 2. * self.eps * self.random_choice([c, 1, 1])

                x_new = x_best_curr + new_deltas
                x_new = torch.min(torch.max(x_new, x_curr - self.eps), x_curr + self.eps)
                x_new = torch.clamp(x_new, 0., 1.)
                x_new = self.check_shape(x_new)

                changed = (x_new != x_best_curr).flatten(1).any(1)
                margin, loss = self._margin_and_loss_of_changed(
                    x_new, y_curr, changed, margin_min_curr.reshape(-1), loss_min_curr.reshape(-1))

                idx_improved = (loss < loss_min_curr).float()
                loss_min[idx_to_fool] = idx_improved * loss + (1. - idx_improved) * loss_min_curr
                idx_miscl = (margin <= 0.).float()
                idx_improved = torch.max(idx_improved, idx_miscl)
                margin_min[idx_to_fool] = idx_improved * margin + (1. - idx_improved) * margin_min_curr
                idx_improved = idx_improved.reshape([-1, *[1] * len(x.shape[:-1])])
                x_best[idx_to_fool] = idx_improved * x_new + (1. - idx_improved) * x_best_curr
                n_queries[idx_to_fool] += 1.

                ind_succ = (margin_min <= 0.).nonzero().squeeze()
                if ind_succ.numel() == n_ex_total:
                    break

        return n_queries, x_best
