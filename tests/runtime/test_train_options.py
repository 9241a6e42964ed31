"""Gradient clipping and learning-rate schedules train exactly like PyTorch eager with
torch.nn.utils.clip_grad_*_ and torch.optim.lr_scheduler (sgd, adam, adamw), and clipping by
norm costs a whole-region reduction on the wafer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from conftest import artifact_for, rel_error, run_steps, small_spec

import wse_sim.runtime as rt
from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss

STEPS = 20
CASES = {
    # optimizer, grad_clip, lr_scheduler
    "sgd-step-value": (
        {"name": "sgd", "lr": 0.2, "momentum": 0.9},
        {"clip_value": 0.02},
        {"name": "step", "step_size": 4, "gamma": 0.5},
    ),
    "adam-cosine-norm": (
        {"name": "adam", "lr": 0.02},
        {"max_norm": 0.05},
        {"name": "cosine", "T_max": 8, "eta_min": 0.001},
    ),
    "adamw-warmup_cosine-infnorm": (
        {"name": "adamw", "lr": 0.03, "weight_decay": 0.1},
        {"max_norm": 0.05, "norm_type": "inf"},
        {"name": "warmup_cosine", "warmup_iters": 4, "T_max": 12, "start_factor": 0.1},
    ),
    "sgd-linear-norm": (
        {"name": "sgd", "lr": 0.3},
        {"max_norm": 0.5, "norm_type": 2.0},
        {"name": "linear", "start_factor": 0.25, "end_factor": 1.0, "total_iters": 6},
    ),
}


def eager_losses(spec: dict[str, Any], steps: int, *, clip: bool = True) -> np.ndarray:
    """PyTorch eager with torch's own clipping and scheduler classes, stepped once per step."""
    torch.manual_seed(spec["train"]["seed"])
    model = BUILTIN_MODELS[spec["model"]["builtin"]](**builtin_kwargs(spec))
    opt = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(model.parameters())
    sched = _torch_scheduler(opt, spec["train"]["lr_scheduler"])
    grad_clip = spec["train"]["grad_clip"]
    losses = []
    for step in range(steps):
        x, y = (torch.from_numpy(a) for a in synthetic_batch(spec, step))
        opt.zero_grad()
        loss = compute_loss(spec["train"]["loss"], model(x), y)
        loss.backward()
        if clip and grad_clip.get("clip_value") is not None:
            torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip["clip_value"])
        elif clip:
            norm = grad_clip.get("norm_type", 2.0)
            norm = float("inf") if norm == "inf" else float(norm)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip["max_norm"], norm)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return np.array(losses)


def _torch_scheduler(opt: torch.optim.Optimizer, raw: dict[str, Any]) -> Any:
    s = torch.optim.lr_scheduler
    if raw["name"] == "step":
        return s.StepLR(opt, raw["step_size"], gamma=raw["gamma"])
    if raw["name"] == "cosine":
        return s.CosineAnnealingLR(opt, raw["T_max"], eta_min=raw["eta_min"])
    if raw["name"] == "linear":
        return s.LinearLR(opt, raw["start_factor"], raw["end_factor"], raw["total_iters"])
    warm = s.LinearLR(opt, raw["start_factor"], 1.0, raw["warmup_iters"])
    cosine = s.CosineAnnealingLR(opt, raw["T_max"], eta_min=raw["eta_min"])
    return s.SequentialLR(opt, [warm, cosine], milestones=[raw["warmup_iters"]])


def options_spec(case: str, family: str = "mlp") -> dict[str, Any]:
    """A small built-in spec with the case's optimizer, clipping and schedule."""
    optimizer, grad_clip, scheduler = CASES[case]
    spec = small_spec(family, optimizer=optimizer)
    train = dict(spec["train"], grad_clip=grad_clip, lr_scheduler=scheduler)
    from sam_server.schemas.job_spec import JobSpec

    return JobSpec.model_validate(dict(spec, train=train)).model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_clipping_and_schedule_losses_match_pytorch_eager(case: str, wafer) -> None:
    spec = options_spec(case)
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    ours = run_steps(job, spec, STEPS)
    reference = eager_losses(spec, STEPS)
    assert rel_error(ours, reference) < 1e-3, (ours[:6], reference[:6])
    # The options really act: without clipping eager PyTorch trains differently.
    assert rel_error(eager_losses(spec, STEPS, clip=False), reference) > 3e-3


def test_transformer_with_clipping_and_warmup_matches_pytorch(wafer) -> None:
    spec = options_spec("adamw-warmup_cosine-infnorm", family="gpt")
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    ours = run_steps(job, spec, 8)
    assert rel_error(ours, eager_losses(spec, 8)) < 1e-3


def test_clip_by_norm_costs_a_whole_region_reduction(wafer) -> None:
    clipped = rt.load(artifact_for(options_spec("adam-cosine-norm")), wafer, (0, 0, 8, 8), "a")
    by_value = rt.load(artifact_for(options_spec("sgd-step-value")), wafer, (0, 8, 8, 8), "b")
    spec = options_spec("adam-cosine-norm")
    clipped.step(*synthetic_batch(spec, 0))
    by_value.step(*synthetic_batch(spec, 0))
    # The global norm meets in one allreduce over the region; clipping by value needs none.
    assert clipped.charger.kernel_cycles["grad_norm"]["reduce"] >= 2 * (8 - 1)
    assert "grad_norm" not in by_value.charger.kernel_cycles


def test_bad_scheduler_and_clip_specs_are_rejected_with_the_fix() -> None:
    from pydantic import ValidationError

    from sam_server.schemas.job_spec import JobSpec

    base = {"name": "x", "model": {"builtin": "mlp"}}
    with pytest.raises(ValidationError, match="needs \\['T_max'\\]"):
        JobSpec.model_validate({**base, "train": {"lr_scheduler": {"name": "cosine"}}})
    with pytest.raises(ValidationError, match="max_norm .* or clip_value"):
        JobSpec.model_validate({**base, "train": {"grad_clip": {}}})
    with pytest.raises(ValidationError, match="norm_type"):
        JobSpec.model_validate({**base, "train": {"grad_clip": {"max_norm": 1, "norm_type": -2}}})
