"""Each step reports the accuracy of its predictions (argmax of the logits before the update),
as eager PyTorch computes it; losses that are not classification report none."""

from __future__ import annotations

import numpy as np
import torch
from conftest import artifact_for, small_spec

import wse_sim.runtime as rt
from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from wse_sim import Wafer


def _eager_accuracies(spec: dict, steps: int) -> list[float]:  # type: ignore[type-arg]
    torch.manual_seed(spec["train"]["seed"])
    model = BUILTIN_MODELS[spec["model"]["builtin"]](**builtin_kwargs(spec))
    opt = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(model.parameters())
    out = []
    for step in range(steps):
        x, y = (torch.from_numpy(a) for a in synthetic_batch(spec, step))
        logits = model(x)
        flat = logits.reshape(-1, logits.shape[-1]).argmax(-1)
        out.append(float((flat == y.reshape(-1)).float().mean()))
        opt.zero_grad()
        compute_loss("cross_entropy", logits, y).backward()
        opt.step()
    return out


def test_step_accuracy_matches_eager_for_classification_and_language_models() -> None:
    for builtin in ("mlp", "gpt"):
        spec = small_spec(builtin, optimizer={"name": "adam", "lr": 0.01})
        job = rt.load(artifact_for(spec), Wafer("wse2", rows=16, cols=16), (0, 0, 8, 8), builtin)
        got = [job.step(*synthetic_batch(spec, k)).accuracy for k in range(8)]
        np.testing.assert_allclose(got, _eager_accuracies(spec, 8), atol=1e-6)
        assert len(set(got)) > 1  # a per-step figure, not a constant


def test_a_regression_loss_reports_no_accuracy() -> None:
    spec = small_spec("mlp", loss="mse", data={"task": "regression", "input_shape": [24]})
    job = rt.load(artifact_for(spec), Wafer("wse2", rows=16, cols=16), (0, 0, 8, 8), "reg")
    assert job.step(*synthetic_batch(spec, 0)).accuracy is None
