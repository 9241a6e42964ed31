"""torchvision's VGG-11 with batch norm (its 7x7 adaptive pooling and 4096-wide classifier), built by torchvision's own constructor with random weights."""

from torch import nn
from torchvision.models import vgg11_bn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = vgg11_bn(weights=None, num_classes=num_classes, dropout=0.0)

    def forward(self, x):
        return self.net(x)
