"""torchvision's MNASNet 0.5, built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import mnasnet0_5


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = mnasnet0_5(weights=None, num_classes=num_classes, dropout=0.0)

    def forward(self, x):
        return self.net(x)
