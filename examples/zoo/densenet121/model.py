"""torchvision's DenseNet-121 (dense concatenation), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import densenet121


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = densenet121(weights=None, num_classes=num_classes)

    def forward(self, x):
        return self.net(x)
