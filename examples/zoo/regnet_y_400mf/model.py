"""torchvision's RegNetY-400MF (grouped convolutions, squeeze-excitation), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import regnet_y_400mf


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = regnet_y_400mf(weights=None, num_classes=num_classes)

    def forward(self, x):
        return self.net(x)
