"""The traced graph, run op by op with real ATen ops, reproduces PyTorch eager training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler.data import synthetic_batch
from compiler.frontend import trace_training_step
from compiler.model_source import ModelCall, build_model
from compiler.training import OptimizerConfig, compute_loss
from tests.compiler.conftest import make_spec, user_model_spec
from tests.compiler.reference_interpreter import run_steps

STEPS = 3

USER_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        h = torch.tanh(self.norm(self.fc1(x)))
        return self.fc2(torch.sigmoid(h) * h)
"""

CONV_USER_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, channels=4):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, 3, padding=1)
        self.norm = nn.LayerNorm([channels, 28, 28])
        self.fc = nn.Linear(channels * 14 * 14, 10)

    def forward(self, x):
        h = F.silu(self.norm(self.conv(x)))
        h = F.max_pool2d(h, 2)
        return self.fc(torch.flatten(h, 1))
"""

LOSS_IN_MODEL = '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    """forward(inputs, targets) returns the loss itself (train.loss: model)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 24)
        self.fc2 = nn.Linear(24, 10)

    def forward(self, x, targets):
        logits = self.fc2(F.relu(self.fc1(x)))
        smooth = -F.log_softmax(logits, dim=-1).mean()
        return F.cross_entropy(logits, targets) + 0.1 * smooth
'''


def eager_reference(spec: dict, files: dict | None, steps: int) -> tuple[list, dict]:
    """Plain PyTorch: same seed, same optimizer, same batches."""
    model = build_model(spec, files)
    optimizer = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(
        model.parameters()
    )
    losses = []
    for k in range(steps):
        x, y = (torch.from_numpy(a) for a in synthetic_batch(spec, k))
        kind = spec["train"]["loss"]
        loss = compute_loss(kind, ModelCall.for_spec(spec, model)(model, x, y), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, {n: p.detach().numpy() for n, p in model.named_parameters()}


CASES = [
    ("mlp", {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    ("mlp", {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("cnn", {"name": "adam", "lr": 1e-2, "weight_decay": 1e-3}),
    ("gpt", {"name": "adamw", "lr": 1e-2, "amsgrad": True}),
    ("gpt", {"name": "sgd", "lr": 0.1, "momentum": 0.5, "dampening": 0.1}),
]


@pytest.mark.parametrize(("builtin", "optimizer"), CASES)
def test_builtin_graph_matches_eager(builtin: str, optimizer: dict) -> None:
    spec = make_spec(builtin, train={"optimizer": optimizer})
    _assert_matches(spec, None)


def test_user_model_graph_matches_eager() -> None:
    spec = user_model_spec(
        train={"optimizer": {"name": "adam", "lr": 1e-2}}, model={"kwargs": {"hidden": 16}}
    )
    _assert_matches(spec, {"model.py": USER_MODEL})


def test_user_conv_model_graph_matches_eager() -> None:
    spec = user_model_spec(
        data={"input_shape": [1, 28, 28], "batch_size": 4},
        train={"optimizer": {"name": "adamw", "lr": 1e-2}},
    )
    _assert_matches(spec, {"model.py": CONV_USER_MODEL})


def test_model_that_returns_its_own_loss_matches_eager() -> None:
    spec = user_model_spec(train={"loss": "model", "optimizer": {"name": "sgd", "lr": 0.1}})
    _assert_matches(spec, {"model.py": LOSS_IN_MODEL})


def test_regression_with_mse_matches_eager() -> None:
    spec = make_spec(
        "mlp",
        data={"task": "regression", "num_classes": 3, "input_shape": [12]},
        train={"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}},
    )
    _assert_matches(spec, None)


def _assert_matches(spec: dict, files: dict | None) -> None:
    traced = trace_training_step(spec, files)
    batches = [synthetic_batch(spec, k) for k in range(STEPS)]
    losses, params = run_steps(traced.graph, traced.tensors, batches)
    want_losses, want_params = eager_reference(spec, files, STEPS)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert losses[-1] != losses[0]  # the weights really changed between steps
    assert set(params) == set(want_params)
    for name, value in want_params.items():
        np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
