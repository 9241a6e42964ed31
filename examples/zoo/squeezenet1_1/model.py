"""torchvision's SqueezeNet 1.1 (fire modules, ceil-mode max pooling), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import squeezenet1_1


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = squeezenet1_1(weights=None, num_classes=num_classes, dropout=0.0)

    def forward(self, x):
        return self.net(x)
