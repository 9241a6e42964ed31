"""Dropout on the wafer: SAM draws masks from its own counter-based RNG, so a traced nn.Dropout
keeps the right fraction of elements and scales them by 1 / (1 - p), but its masks (and so the
losses) differ from PyTorch eager step by step."""

from __future__ import annotations

import numpy as np
from conftest import artifact_for, make_spec, run_steps, torch_reference

import wse_sim.runtime as rt
from wse_sim import Wafer

P = 0.3
WIDTH = 4096

MODEL = f"""
import torch
from torch import nn


class Net(nn.Module):
    # measure: "keep" -> the fraction of elements dropout keeps; "scale" -> mean of the output
    # of dropout on ones (1 when kept values are scaled by 1 / (1 - p)).
    def __init__(self, measure: str = "keep"):
        super().__init__()
        self.w = nn.Parameter(torch.ones({WIDTH}))
        self.drop = nn.Dropout({P})
        self.measure = measure

    def forward(self, x, y):
        d = self.drop(self.w)
        if self.measure == "keep":
            return (d != 0).float().mean() + 0.0 * self.w.sum()
        return d.mean()
"""


def _net_class() -> type:
    namespace: dict = {}
    exec(compile(MODEL, "model.py", "exec"), namespace)
    return namespace["Net"]


def _spec(measure: str) -> dict:
    return make_spec(
        model_file="model.py",
        kwargs={"measure": measure},
        loss="model",
        # lr 1e-9 leaves w == 1 in float32: every step measures a fresh mask on ones
        optimizer={"name": "sgd", "lr": 1e-9},
        data={"task": "regression", "input_shape": [2], "num_classes": 1},
    )


def _wafer_measures(measure: str, steps: int = 8) -> np.ndarray:
    spec = _spec(measure)
    artifact = artifact_for(spec, {"model.py": MODEL})
    assert any(
        "dropout" in n["target"] or "bernoulli" in n["target"] for n in artifact.graph["nodes"]
    )
    job = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), f"drop-{measure}")
    return run_steps(job, spec, steps)


def test_dropout_keeps_one_minus_p_and_scales_by_its_inverse() -> None:
    keep = _wafer_measures("keep")
    # 4096 Bernoulli(0.7) draws: standard deviation 0.007 per step
    assert np.all(np.abs(keep - (1 - P)) < 0.03), keep
    assert abs(keep.mean() - (1 - P)) < 0.01
    assert len(set(keep.tolist())) > 1, "every step draws a new mask"
    scale = _wafer_measures("scale")
    assert abs(scale.mean() - 1.0) < 0.02, scale  # without the 1 / (1 - p) scaling it would be 0.7


def test_dropout_masks_differ_from_pytorch_eager_step_by_step() -> None:
    ours = _wafer_measures("keep", steps=4)
    eager, _ = torch_reference(_spec("keep"), 4, _net_class())
    assert not np.allclose(ours, eager, rtol=0, atol=1e-6)  # a different random stream
    assert np.all(np.abs(eager - (1 - P)) < 0.03)  # the same distribution
