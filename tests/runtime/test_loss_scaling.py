"""Dynamic loss scaling follows torch.amp.GradScaler: the same skipped steps, scale backoff and
growth, and (in float32) the same losses; an fp16 job whose gradients overflow trains with it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from conftest import artifact_for, make_spec, rel_error, run_steps, small_spec

import wse_sim.runtime as rt
from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec

# float32 tops out at 3.4e38: with inputs of size ~100 the scaled gradients overflow at the
# initial scale and fit a few halvings later; growth every 3 clean steps overflows again.
SCALING = {"enabled": True, "init_scale": 3e38, "growth_interval": 3}


def _loud_batch(spec: dict[str, Any], step: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = synthetic_batch(spec, step)
    return x * 100, y


def _validated(spec: dict[str, Any]) -> dict[str, Any]:
    return JobSpec.model_validate(spec).model_dump(mode="json", by_alias=True)


def eager_grad_scaler(
    spec: dict[str, Any], steps: int
) -> tuple[np.ndarray, list[bool], list[float]]:
    """Eager PyTorch with torch.amp.GradScaler('cpu'): losses, skipped steps, scale after each."""
    torch.manual_seed(spec["train"]["seed"])
    model = BUILTIN_MODELS[spec["model"]["builtin"]](**builtin_kwargs(spec))
    opt = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(model.parameters())
    raw = spec["train"]["loss_scaling"]
    scaler = torch.amp.GradScaler(
        "cpu",
        init_scale=raw["init_scale"],
        growth_factor=raw["growth_factor"],
        backoff_factor=raw["backoff_factor"],
        growth_interval=raw["growth_interval"],
    )
    losses, skipped, scales = [], [], []
    for step in range(steps):
        x, y = (torch.from_numpy(a) for a in _loud_batch(spec, step))
        opt.zero_grad()
        loss = compute_loss(spec["train"]["loss"], model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec["train"]["grad_clip"]["max_norm"])
        found = sum(v.item() for v in scaler._found_inf_per_device(opt).values())
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
        skipped.append(found > 0)
        scales.append(scaler.get_scale())
    return np.array(losses), skipped, scales


def test_float32_loss_scaling_matches_torch_grad_scaler(wafer) -> None:
    spec = small_spec("mlp", optimizer={"name": "adam", "lr": 0.01})
    spec = _validated(
        dict(spec, train=dict(spec["train"], loss_scaling=SCALING, grad_clip={"max_norm": 0.5}))
    )
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    with np.errstate(all="ignore"):
        results = [job.step(*_loud_batch(spec, k)) for k in range(16)]
    losses, skipped, scales = eager_grad_scaler(spec, 16)
    assert [r.skipped for r in results] == skipped
    assert 3 <= sum(skipped) < 16, "the run must both skip and apply updates"
    assert [r.loss_scale for r in results] == scales
    # Adam's bias correction counts applied updates only, as torch.optim does under GradScaler.
    assert rel_error(np.array([r.loss for r in results]), losses) < 1e-3


def _overflow_spec(enabled: bool) -> dict[str, Any]:
    spec = make_spec(
        "mlp",
        kwargs={"hidden": 16},
        loss="mse",
        fp16=True,
        optimizer={"name": "sgd", "lr": 3e-8},
        data={"task": "regression", "input_shape": [10], "num_classes": 3},
    )
    scaling = {"enabled": enabled, "init_scale": 256.0, "growth_interval": 4}
    return _validated(dict(spec, train=dict(spec["train"], loss_scaling=scaling)))


def _big_batch(spec: dict[str, Any], step: int) -> tuple[np.ndarray, np.ndarray]:
    # Large inputs and targets: fp16 weight gradients reach ~1e6, past float16's 65504.
    x, y = synthetic_batch(spec, step)
    return x * 3000, y * 3000


def test_fp16_job_that_overflows_without_scaling_trains_with_it(wafer) -> None:
    plain = rt.load(artifact_for(_overflow_spec(False)), wafer, (0, 0, 8, 8), "plain")
    with np.errstate(all="ignore"):
        unscaled = [plain.step(*_big_batch(_overflow_spec(False), k)).loss for k in range(4)]
    assert not np.all(np.isfinite(unscaled)), "without loss scaling the fp16 gradients overflow"

    spec = _overflow_spec(True)
    job = rt.load(artifact_for(spec), wafer, (0, 8, 8, 8), "scaled")
    scale_name = next(i["name"] for i in job.graph["inputs"] if i["source_name"] == "_amp.scale")
    results, unchanged = [], []
    for k in range(40):
        before = {n: v.copy() for n, v in job.state.items() if n.startswith("p")}
        with np.errstate(all="ignore"):
            results.append(job.step(*_big_batch(spec, k)))
        unchanged.append(all(np.array_equal(before[n], job.state[n]) for n in before))
    losses = np.array([r.loss for r in results])
    skipped = [r.skipped for r in results]
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(job.state["p0"]))
    assert losses[-10:].mean() < 0.8 * losses[:10].mean(), "it trains"
    assert skipped[:4] == [True] * 4 and not all(skipped[-10:])
    assert unchanged == skipped, "a skipped step leaves the weights as they were"
    # The scale follows torch's own update rule fed with the same overflow flags.
    scale, tracker = torch.tensor([256.0]), torch.tensor([0], dtype=torch.int32)
    for result in results:
        torch._amp_update_scale_(scale, tracker, torch.tensor([float(result.skipped)]), 2.0, 0.5, 4)
        assert result.loss_scale == scale.item()
    assert float(job.state[scale_name]) == results[-1].loss_scale
    assert float(job.state_dict()["_amp.scale"]) == results[-1].loss_scale  # it is checkpointed


def test_skipped_steps_are_logged(tmp_path) -> None:
    from sam_server.config import Settings
    from sam_worker.wafer_runner import StepReporter
    from wse_sim.runtime.training import StepRecord

    reporter = StepReporter(
        "sqlite://", "job", "owner", 1, tmp_path, every_s=3600, settings=Settings(data_dir=tmp_path)
    )
    reporter.on_step(StepRecord(1.5, 100, 10.0, skipped=True, loss_scale=32768.0, step=3))
    assert any(
        level == "WARNING" and "step 3" in text and "skipped" in text and "32768" in text
        for level, text in reporter.lines
    )


def test_loss_scaling_is_off_in_float32_unless_asked(wafer) -> None:
    spec = small_spec("mlp")
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    assert run_steps(job, spec, 1).size == 1
    assert job.step(*synthetic_batch(spec, 1)).loss_scale is None
    assert not any(i["source_name"].startswith("_amp") for i in job.graph["inputs"])
