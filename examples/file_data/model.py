"""A small regression network for the make_batch example."""

from torch import nn


class Regressor(nn.Module):
    def __init__(self, features: int = 8, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Sigmoid(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)
