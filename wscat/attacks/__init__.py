"""One L-inf PGD engine with pluggable objectives; FGSM is its one-step case; AutoAttack through
pyautoattack (standard and the paper's variant, resumable in shards); NRF; gradient-masking checks."""
from wscat.attacks.mode import eval_mode_enforced, require_eval
from wscat.attacks.objectives import ce_objective, cw_margin, cw_objective
from wscat.attacks.pgd import fgsm, frozen_batchnorm_stats, pgd

__all__ = ["ce_objective", "cw_margin", "cw_objective", "eval_mode_enforced", "fgsm",
           "frozen_batchnorm_stats", "pgd", "require_eval"]
