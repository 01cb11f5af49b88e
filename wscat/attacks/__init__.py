"""One L-inf PGD engine with pluggable objectives; FGSM is its one-step case; AutoAttack adapter."""
from wscat.attacks.objectives import ce_objective, cw_objective
from wscat.attacks.pgd import fgsm, frozen_batchnorm_stats, pgd

__all__ = ["ce_objective", "cw_objective", "fgsm", "frozen_batchnorm_stats", "pgd"]
