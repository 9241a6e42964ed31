"""Memory options the seed documents: a lower max_activation_memory turns a compile_oom into a job
that trains (micro-batches with gradient accumulation, the full batch's losses), and
optimizer_state_offload moves optimizer state to the host, paying for it in host-link time."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import rel_error, run_steps, torch_reference

import wse_sim.runtime as rt
from compiler import compile_job
from compiler.artifact import load_artifact
from compiler.errors import CompileOOM
from sam_server.schemas.job_spec import JobSpec
from wse_sim import Wafer
from wse_sim.runtime.report import report

_CACHE = Path(tempfile.mkdtemp(prefix="sam-memory-options-"))


def _spec(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "memory-options",
        "model": {"builtin": "mlp", "kwargs": {"hidden": 32}},
        "data": {"task": "classification", "input_shape": [32], "num_classes": 8},
        "train": {"optimizer": {"name": "adam", "lr": 0.003}},
    }
    for name, value in sections.items():
        raw[name] = {**raw.get(name, {}), **value}
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def _big_batch(budget: Any = None) -> dict[str, Any]:
    """A batch of 256 whose activations do not fit a 3x3 region in one piece."""
    return _spec(
        data={"batch_size": 256},
        compile_options={"max_activation_memory": budget},
        train={"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}},
    )


def test_default_activation_memory_is_a_compile_oom_that_suggests_the_budget() -> None:
    with pytest.raises(CompileOOM, match="max_activation_memory"):
        compile_job(_big_batch(), {}, region=(3, 3), cache_dir=_CACHE)


@pytest.mark.parametrize("budget", [0.00005, "48KB"])  # the seed's GB number, or with a unit
def test_lower_activation_budget_trains_with_full_batch_losses(budget: Any) -> None:
    spec = _big_batch(budget)
    result = compile_job(spec, {}, region=(3, 3), cache_dir=_CACHE)
    chosen = result.summary["activation_budget"]
    assert chosen["strategy"] == "micro_batching" and chosen["micro_batches"] > 1
    assert (
        chosen["activation_bytes"] <= chosen["budget_bytes"] < chosen["full_batch_activation_bytes"]
    )
    assert (
        chosen["cycles_per_micro_batch"] * chosen["micro_batches"]
        <= (result.summary["estimated_cycles_per_step"])
    )
    job = rt.load(
        load_artifact(result.artifact_dir), Wafer("wse2", rows=8, cols=8), (0, 0, 3, 3), "a"
    )
    ours = run_steps(job, spec, 12)
    reference, params = torch_reference(spec, 12)
    assert rel_error(ours, reference) < 1e-3, (ours[:4], reference[:4])
    final = job.state_dict()
    for name, value in params.items():
        scale = max(float(np.max(np.abs(value))), 1e-3)
        assert float(np.max(np.abs(final[name] - value))) / scale < 1e-3, name
    shown = report(job, Path(tempfile.mkdtemp()))
    assert shown["compile"]["activation_budget"]["micro_batches"] == chosen["micro_batches"]
    assert shown["throughput"]["micro_batches"] == chosen["micro_batches"]


def test_budget_below_one_sample_is_a_clear_compile_oom() -> None:
    with pytest.raises(CompileOOM, match="raise max_activation_memory or lower batch_size"):
        compile_job(_big_batch("100B"), {}, region=(3, 3), cache_dir=_CACHE)


@pytest.mark.parametrize("budget", ["2KiB/PE", 2048])
def test_per_pe_form_keeps_the_older_cap_without_micro_batching(budget: Any) -> None:
    """'/PE', and a bare integer above 64 as docs/contract.md first wrote the key, cap bytes per PE."""
    spec = _spec(compile_options={"max_activation_memory": budget})
    result = compile_job(spec, {}, region=(6, 6), cache_dir=_CACHE)
    assert "activation_budget" not in result.summary
    assert all(k["memory_per_pe"]["activations"] <= 2048 for k in result.summary["kernels"])


def _adam_wide(offload: bool) -> dict[str, Any]:
    return _spec(
        model={"builtin": "mlp", "kwargs": {"hidden": 128}},
        data={"input_shape": [128], "batch_size": 8},
        compile_options={"optimizer_state_offload": offload},
    )


def test_optimizer_offload_fits_a_model_that_ooms_and_charges_host_time() -> None:
    with pytest.raises(CompileOOM, match="optimizer"):
        compile_job(_adam_wide(False), {}, region=(3, 4), cache_dir=_CACHE)
    spec = _adam_wide(True)
    result = compile_job(spec, {}, region=(3, 4), cache_dir=_CACHE)
    assert all(k["memory_per_pe"]["optimizer"] == 0 for k in result.summary["kernels"])
    # Adam's two moments of every weight travel in and back out each step.
    params = result.summary["num_params"]
    assert result.summary["optimizer_offload"]["host_bytes_per_step"] == 2 * 2 * 4 * params
    assert result.summary["optimizer_offload"]["host_cycles_per_step"] > 0
    job = rt.load(
        load_artifact(result.artifact_dir), Wafer("wse2", rows=8, cols=8), (0, 0, 3, 4), "a"
    )
    ours = run_steps(job, spec, 5)
    assert rel_error(ours, torch_reference(spec, 5)[0]) < 1e-3
    shown = report(job, Path(tempfile.mkdtemp()))
    offload = shown["throughput"]["offload_cycles_per_step"]
    # Streaming ~2 x 136 KB over the region's host channels dominates this small step.
    assert offload > 0.3 * shown["throughput"]["cycles_per_step"]
    # The compiler's estimate uses the simulator's host link model.
    estimate = result.summary["optimizer_offload"]["host_cycles_per_step"]
    assert abs(estimate - offload) <= 0.05 * offload
    assert shown["compile"]["optimizer_state_offload"] is True


def test_micro_batching_composes_with_clipping_and_schedule() -> None:
    from test_train_options import eager_losses

    spec = _spec(
        data={"batch_size": 256},
        compile_options={"max_activation_memory": "48KB"},
        train={
            "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.1},
            "grad_clip": {"max_norm": 0.2},
            "lr_scheduler": {"name": "warmup_cosine", "warmup_iters": 3, "T_max": 6},
        },
    )
    result = compile_job(spec, {}, region=(3, 3), cache_dir=_CACHE)
    assert result.summary["activation_budget"]["micro_batches"] > 1
    job = rt.load(
        load_artifact(result.artifact_dir), Wafer("wse2", rows=8, cols=8), (0, 0, 3, 3), "a"
    )
    # The global norm is over the accumulated (full-batch) gradient, as in eager PyTorch.
    assert rel_error(run_steps(job, spec, 10), eager_losses(spec, 10)) < 1e-3
