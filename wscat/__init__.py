"""wscat: Weakly Supervised Contrastive Adversarial Training (Zhang et al., CVPR 2025), reproduced."""
__version__ = "0.1.0"
