"""A user CNN with BatchNorm in training mode (plus hardswish, depthwise convolution and
adaptive pooling) compiles and trains like PyTorch eager: same losses, and the BatchNorm
running statistics follow torch's update and survive a checkpoint round trip."""

from __future__ import annotations

import numpy as np
from conftest import artifact_for, make_spec, rel_error, run_steps, torch_reference

import wse_sim.runtime as rt

BN_MODEL = """
import torch
import torch.nn.functional as F
from torch import nn

class Net(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.dw = nn.Conv2d(width, width, 3, padding=1, groups=width, bias=False)
        self.bn2 = nn.BatchNorm2d(width, momentum=0.3)
        self.head = nn.Linear(width * 4, 5)

    def forward(self, x):
        h = F.hardswish(self.bn1(self.stem(x)))
        h = F.relu6(self.bn2(self.dw(h))) * F.hardsigmoid(h)
        return self.head(F.adaptive_avg_pool2d(h, 2).flatten(1))
"""
STEPS = 8


def _spec() -> dict:
    return make_spec(
        model_file="model.py",
        kwargs={"width": 6},
        optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.9},
        data={"task": "classification", "input_shape": [3, 6, 6], "num_classes": 5},
    )


def _eager(spec: dict, steps: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """PyTorch eager on BN_MODEL: losses and the final state dict (running statistics too)."""
    namespace: dict = {}
    exec(BN_MODEL, namespace)
    return torch_reference(spec, steps, namespace["Net"], buffers=True)


def test_batchnorm_cnn_losses_and_running_stats_match_pytorch(wafer) -> None:
    spec = _spec()
    job = rt.load(artifact_for(spec, {"model.py": BN_MODEL}), wafer, (0, 0, 8, 8), "bn")
    ours = run_steps(job, spec, STEPS)
    ref, ref_state = _eager(spec, STEPS)
    assert rel_error(ours, ref) < 1e-3, (ours, ref)
    state = job.state_dict()
    for name in ("bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"):
        assert not np.allclose(state[name], np.zeros_like(state[name]) + (name[-3:] == "var"))
        np.testing.assert_allclose(state[name], ref_state[name], rtol=1e-4, atol=1e-6)
    assert state["bn1.num_batches_tracked"].item() == STEPS


def test_running_stats_restore_from_a_checkpoint(wafer) -> None:
    spec = _spec()
    artifact = artifact_for(spec, {"model.py": BN_MODEL})
    whole = rt.load(artifact, wafer, (0, 0, 8, 8), "whole")
    run_steps(whole, spec, 6)
    first = rt.load(artifact, wafer, (8, 8, 8, 8), "first")
    run_steps(first, spec, 3)
    saved = first.state_dict()
    first.load_state_dict({k: np.zeros_like(v) if "running" in k else v for k, v in saved.items()})
    first.load_state_dict(saved)  # the checkpoint brings the statistics back
    run_steps(first, spec, 3, start=3)
    for name in ("bn1.running_mean", "bn2.running_var"):
        np.testing.assert_array_equal(first.state_dict()[name], whole.state_dict()[name])
