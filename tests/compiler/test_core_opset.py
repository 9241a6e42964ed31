"""Models that use ops outside SAM's kernel families train on the wafer with eager's losses: the
front end traces to PyTorch's core ATen opset (torch.roll's fmod, GroupNorm, in-place updates of
slices, nn.LSTM without eager's mkldnn kernel) and keeps custom autograd.Functions' own backward.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.data import synthetic_batch
from compiler.frontend import trace_training_step
from tests.compiler.conftest import user_model_spec
from tests.compiler.test_frontend_equivalence import eager_reference
from tests.compiler.wafer_runner import wafer_steps

STEPS = 3
RTOL = 1e-3

ROLL = '''import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    """Swin's shifted windows: roll the feature map, mix, roll back."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 14 * 14, 10)

    def forward(self, x):
        h = torch.roll(self.conv(x), shifts=(-3, -3), dims=(2, 3))
        h = torch.roll(F.gelu(h), shifts=(3, 3), dims=(2, 3))
        return self.fc(F.avg_pool2d(h, 2).flatten(1))
'''

GROUP_NORM = '''import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    """PoolFormer's norm: GroupNorm(1, C) and GroupNorm with several groups."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.norm1 = nn.GroupNorm(1, 8)
        self.norm4 = nn.GroupNorm(4, 8)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        h = self.norm1(self.conv(x))
        h = h + F.avg_pool2d(h, 3, stride=1, padding=1) - h
        return self.fc(F.relu(self.norm4(h)).flatten(1))
'''

SLICE_UPDATE = '''import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    """GhostNet's shortcut: an in-place add into a slice of a view."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 16)
        self.short = nn.Linear(784, 8)
        self.out = nn.Linear(16, 10)

    def forward(self, x):
        h = self.fc(x)
        h[:, :8] += self.short(x)
        return self.out(torch.tanh(h))
'''

LSTM = '''import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    """Rows of the image as a sequence through a two-layer LSTM."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 12, num_layers=2, batch_first=True)
        self.out = nn.Linear(12, 10)

    def forward(self, x):
        h, _ = self.lstm(x.reshape(x.shape[0], 28, 28))
        return self.out(h[:, -1])
'''

# Both Functions' backward differs from the derivative of their forward (a straight-through
# estimator, a scaled gradient): matching eager means their own backward ran.
OLD_STYLE_FUNCTION = '''import torch
from torch import nn
import torch.nn.functional as F

class RoundSTE(torch.autograd.Function):
    """Old style: forward(ctx, ...) saves on ctx; backward passes the gradient straight through."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() < ctx.scale).to(grad.dtype), None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc2(RoundSTE.apply(self.fc1(x), 4.0))
'''

NEW_STYLE_FUNCTION = '''import torch
from torch import nn
import torch.nn.functional as F

class ScaledGrad(torch.autograd.Function):
    """New style: forward without ctx, setup_context saves the output; backward halves it."""

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return 0.5 * grad * (1 - y * y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc2(ScaledGrad.apply(self.fc1(x)))
'''

IMAGE = {"input_shape": [1, 28, 28], "batch_size": 4}
CASES = {
    "roll": (ROLL, IMAGE),
    "group_norm": (GROUP_NORM, IMAGE),
    "slice_update": (SLICE_UPDATE, {"batch_size": 4}),
    "lstm": (LSTM, {"input_shape": [784], "batch_size": 4}),
    "old_style_function": (OLD_STYLE_FUNCTION, {"batch_size": 4}),
    "new_style_function": (NEW_STYLE_FUNCTION, {"batch_size": 4}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_model_trains_on_the_wafer_like_eager(case: str) -> None:
    source, data = CASES[case]
    spec = user_model_spec(data=data, train={"optimizer": {"name": "adam", "lr": 1e-2}})
    files = {"model.py": source}
    traced = trace_training_step(spec, files)
    batches = [synthetic_batch(spec, k) for k in range(STEPS)]
    losses, state = wafer_steps(traced, spec, batches)
    want_losses, want_params = eager_reference(spec, files, STEPS)
    np.testing.assert_allclose(losses, want_losses, rtol=RTOL)
    assert losses[-1] != losses[0]  # the weights really changed between steps
    for name, value in want_params.items():
        np.testing.assert_allclose(state[name], value, rtol=RTOL, atol=1e-5, err_msg=name)


def test_eager_backend_ops_never_reach_the_lowering() -> None:
    """nn.LSTM traces to matmuls and pointwise ops, not the CPU backend's mkldnn_rnn_layer,
    and GroupNorm / torch.roll to kernels the wafer has."""
    for case in ("lstm", "group_norm", "roll"):
        source, data = CASES[case]
        traced = trace_training_step(user_model_spec(data=data), {"model.py": source})
        targets = {n["target"] for n in traced.graph["nodes"]}
        assert not any("mkldnn" in t or "group_norm" in t for t in targets), (case, targets)
