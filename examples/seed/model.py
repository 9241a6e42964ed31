"""A small convolutional classifier: a plain PyTorch module, nothing SAM-specific."""

import torch.nn as nn


class SmallConvNet(nn.Module):
    def __init__(self, channels: int = 4, num_classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, kernel_size=3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(channels * 8 * 8, num_classes)

    def forward(self, x):
        return self.fc(self.act(self.conv(x)).flatten(1))
