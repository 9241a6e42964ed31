"""timm's ResNet-18-D (deep stem, average-pool shortcuts), built by timm.create_model with random weights (pretrained=False)."""

import timm
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.net = timm.create_model(
            "resnet18d",
            pretrained=False,
            num_classes=num_classes,
            drop_rate=0.0,
            drop_path_rate=0.0,
        )

    def forward(self, x):
        return self.net(x)
