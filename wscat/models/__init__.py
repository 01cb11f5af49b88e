"""Models return (penultimate features, logits); normalisation lives inside the model."""
from wscat.models.cnn import SmallCNN
from wscat.models.heads import ProjectionHead
from wscat.models.registry import MODELS, LogitsOnly, build_model, model_options
from wscat.models.resnet import ResNet
from wscat.models.wideresnet import WideResNet

__all__ = ["MODELS", "LogitsOnly", "ProjectionHead", "ResNet", "SmallCNN", "WideResNet",
           "build_model", "model_options"]
