"""timm's ResNet-10-T (tiered stem), built by timm.create_model with random weights (pretrained=False)."""

import timm
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = timm.create_model(
            "resnet10t",
            pretrained=False,
            num_classes=num_classes,
            drop_rate=0.0,
            drop_path_rate=0.0,
        )

    def forward(self, x):
        return self.net(x)
