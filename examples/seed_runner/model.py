"""A small convolutional classifier of 8x8 digits: a plain PyTorch module."""

import torch.nn as nn


class DigitNet(nn.Module):
    def __init__(self, channels: int = 8, num_classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, kernel_size=3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(channels * 8 * 8, num_classes)

    def forward(self, x):
        return self.fc(self.act(self.conv(x)).flatten(1))
