"""On the embedded cluster with real worker processes: a job that fails with compile_oom at the
default activation memory trains once max_activation_memory is lowered, with PyTorch's losses."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import torch

from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec
from tests.e2e.test_cancel_preempt import _setup, _submit, _wait, small_cluster  # noqa: F401

pytestmark = pytest.mark.slow
STEPS = 6


def _spec(name: str, budget: str | None) -> dict:  # type: ignore[type-arg]
    return {
        "name": name,
        "model": {"builtin": "mlp", "kwargs": {"hidden": 32}},
        "data": {"input_shape": [32], "num_classes": 8, "batch_size": 256},
        "train": {"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}},
        "compile_options": {"max_activation_memory": budget},
        "run_options": {"steps_per_epoch": STEPS, "checkpoint_every": 50},
        "resources": {"region": {"rows": 3, "cols": 3}, "time_limit": "10m"},
    }


def _eager_losses(raw: dict) -> np.ndarray:  # type: ignore[type-arg]
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    torch.manual_seed(0)
    model = BUILTIN_MODELS["mlp"](**builtin_kwargs(spec))
    opt = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        x, y = (torch.from_numpy(a) for a in synthetic_batch(spec, step))
        opt.zero_grad()
        loss = compute_loss("cross_entropy", model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def test_lowering_max_activation_memory_turns_compile_oom_into_training(small_cluster):  # noqa: F811
    c = small_cluster
    pi = _setup(c)
    oom_id = _submit(c, pi, _spec("default-budget", None))
    failed = _wait(c, pi, oom_id, lambda j: j["state"] in ("failed", "succeeded"))
    assert failed["state"] == "failed" and failed["error"]["kind"] == "compile_oom"
    assert "max_activation_memory" in failed["error"]["message"]

    raw = _spec("lowered-budget", "48KB")
    job_id = _submit(c, pi, raw)
    done = _wait(c, pi, job_id, lambda j: j["state"] in ("failed", "succeeded"))
    assert done["state"] == "succeeded", done["error"]
    steps = httpx.get(f"{c.url}/api/v1/jobs/{job_id}/metrics", headers=pi).json()["steps"]
    ours = np.array([s["loss"] for s in steps])
    reference = _eager_losses(raw)
    assert ours.shape == reference.shape
    assert float(np.max(np.abs(ours - reference) / np.abs(reference))) < 1e-3
    report = httpx.get(f"{c.url}/api/v1/jobs/{job_id}/report", headers=pi).json()
    assert report["compile"]["activation_budget"]["strategy"] == "micro_batching"
