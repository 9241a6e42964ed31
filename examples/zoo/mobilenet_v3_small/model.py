"""torchvision's MobileNetV3-Small (hardswish, squeeze-excitation with hardsigmoid), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import mobilenet_v3_small


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = mobilenet_v3_small(weights=None, num_classes=num_classes, dropout=0.0)

    def forward(self, x):
        return self.net(x)
