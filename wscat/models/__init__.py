"""Models return (penultimate features, logits); normalisation lives inside the model."""
from wscat.models.cnn import SmallCNN
from wscat.models.heads import ProjectionHead
from wscat.models.registry import LogitsOnly, build_model

__all__ = ["LogitsOnly", "ProjectionHead", "SmallCNN", "build_model"]
