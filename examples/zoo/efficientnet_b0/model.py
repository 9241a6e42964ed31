"""torchvision's EfficientNet-B0 (SiLU, squeeze-excitation), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import efficientnet_b0


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = efficientnet_b0(
            weights=None, num_classes=num_classes, dropout=0.0, stochastic_depth_prob=0.0
        )

    def forward(self, x):
        return self.net(x)
