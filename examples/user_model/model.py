"""An ordinary PyTorch model: SAM runs `torch.manual_seed(seed); Net(**kwargs)` and traces the
training step (forward, loss, backward, optimizer) once."""

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self, in_features: int = 32, hidden: int = 64, num_classes: int = 4):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, num_classes)
        self.drop = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.norm(self.fc1(x)))
        h = h + torch.tanh(self.fc2(self.drop(h)))  # residual connection
        return self.head(h)
