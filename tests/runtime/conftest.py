"""Helpers for the runtime tests: small job specs, their artifacts, and the PyTorch eager reference."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec
from wse_sim.runtime.kernels import KERNELS, NodeContext

REGION = (8, 8)
torch.set_num_threads(1)  # the test machine is shared; threads only add contention here
_CACHE_DIR = Path(tempfile.mkdtemp(prefix="sam-runtime-tests-"))
_ARTIFACTS: dict[str, Any] = {}


def node_context(target: str, **fields: Any) -> NodeContext:
    """A kernel's NodeContext for `target`: node n0 (index 0, seed 0) of float32 data on a 4x4
    rect, with `fields` overriding any of those (rect, seed, node_index, step_of, shape...)."""
    base: dict[str, Any] = {
        "name": "n0",
        "dtype": "float32",
        "shape": None,
        "shapes": None,
        "rect": (0, 0, 4, 4),
        "fp16": False,
        "seed": 0,
        "node_index": 0,
    }
    return NodeContext(target=target, **{**base, **fields})


def kernel(target: str, **fields: Any) -> Any:
    """The runtime's kernel for `target`, built for `node_context(target, **fields)`."""
    return KERNELS[target](node_context(target, **fields))


def make_spec(
    builtin: str | None = None,
    *,
    optimizer: dict[str, Any] | None = None,
    fp16: bool = False,
    data: dict[str, Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    model_file: str | None = None,
    loss: str = "cross_entropy",
    execution_mode: str = "pipelined",
) -> dict[str, Any]:
    """A validated job spec dict (the worker's form) for a small model."""
    model = (
        {"builtin": builtin, "kwargs": kwargs or {}}
        if builtin
        else {"file": model_file, "class": "Net", "kwargs": kwargs or {}}
    )
    raw = {
        "name": "runtime-test",
        "model": model,
        "data": {"source": "synthetic", "batch_size": 8, **(data or {})},
        "train": {"loss": loss, "optimizer": optimizer or {"name": "sgd", "lr": 0.05}, "seed": 0},
        "compile_options": {"fp16_enabled": fp16, "execution_mode": execution_mode},
        "resources": {"region": {"rows": REGION[0], "cols": REGION[1]}},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


SMALL = {
    "mlp": dict(
        kwargs={"hidden": 32},
        data={"task": "classification", "input_shape": [24], "num_classes": 5},
    ),
    "cnn": dict(
        kwargs={"channels": 2, "hidden": 16},
        data={"task": "classification", "input_shape": [1, 8, 8], "num_classes": 5},
    ),
    "gpt": dict(
        kwargs={"d_model": 16, "n_heads": 2, "n_layers": 1},
        data={"task": "language_model", "input_shape": [8], "num_classes": 16},
    ),
}


def small_spec(builtin: str, **overrides: Any) -> dict[str, Any]:
    """make_spec for a built-in with the small sizes above."""
    return make_spec(builtin, **{**SMALL[builtin], **overrides})


def _fallback_artifact(spec: dict[str, Any], files: dict[str, str] | None) -> Any:
    """Until compiler.compile_job exists: the traced graph with a single kernel over the region."""
    from compiler.frontend import trace_training_step

    traced = trace_training_step(spec, files)
    names = [n["name"] for n in traced.graph["nodes"]]
    for node in traced.graph["nodes"]:
        node["kernel"] = "k0"
    manifest = {
        "format": "sam-artifact/1",
        "region": {"rows": REGION[0], "cols": REGION[1]},
        "fp16": spec["compile_options"]["fp16_enabled"],
        "batch_size": spec["data"]["batch_size"],
        "execution_mode": spec["compile_options"]["execution_mode"],
        "train": spec["train"],
        "kernels": [
            {
                "id": "k0",
                "nodes": names,
                "op": "elementwise",
                "rect": [0, 0, *REGION],
                "flops": 1000,
                "memory_per_pe": {"weights": 64},
            }
        ],
    }
    return SimpleNamespace(manifest=manifest, graph=traced.graph, tensors=traced.tensors)


def artifact_for(spec: dict[str, Any], files: dict[str, str] | None = None) -> Any:
    """Compile `spec` for the test region (compiler.compile_job when it exists), once per session."""
    key = json.dumps([spec, files], sort_keys=True)
    if key not in _ARTIFACTS:
        _ARTIFACTS[key] = _compile(spec, files)
    return _ARTIFACTS[key]


def _compile(spec: dict[str, Any], files: dict[str, str] | None) -> Any:
    import compiler

    try:
        compile_job = compiler.compile_job
    except (AttributeError, ModuleNotFoundError):
        return _fallback_artifact(spec, files)
    from compiler.artifact import load_artifact

    result = compile_job(spec, files or {}, region=REGION, cache_dir=_CACHE_DIR)
    return load_artifact(result.artifact_dir)


def torch_reference(
    spec: dict[str, Any], steps: int, net: type | None = None, buffers: bool = False
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Plain PyTorch eager on the CPU: per-step losses and the final parameters by name (with
    `buffers`, the whole state dict: batch norm's running statistics too)."""
    from compiler.builtins import BUILTIN_MODELS, builtin_kwargs

    torch.manual_seed(spec["train"]["seed"])
    if net is None:
        model = BUILTIN_MODELS[spec["model"]["builtin"]](**builtin_kwargs(spec))
    else:
        model = net(**spec["model"]["kwargs"])
    opt = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(model.parameters())
    losses = []
    for step in range(steps):
        x, y = synthetic_batch(spec, step)
        opt.zero_grad()
        args = (
            (torch.from_numpy(x), torch.from_numpy(y))
            if spec["train"]["loss"] == "model"
            else (torch.from_numpy(x),)
        )
        loss = compute_loss(spec["train"]["loss"], model(*args), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = model.state_dict().items() if buffers else model.named_parameters()
    return np.array(losses), {k: v.detach().numpy().copy() for k, v in final}


def run_steps(job: Any, spec: dict[str, Any], steps: int, start: int = 0) -> np.ndarray:
    """Losses of `steps` runtime steps from `start` on the spec's synthetic batches."""
    return np.array([job.step(*synthetic_batch(spec, k)).loss for k in range(start, start + steps)])


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| / max(|b|, 1e-3) over the elements."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3))) if a.size else 0.0


@pytest.fixture
def wafer() -> Any:
    """A small simulated WSE-2 wafer (16 x 16 PEs) for two 8 x 8 regions side by side."""
    from wse_sim import Wafer

    return Wafer("wse2", rows=16, cols=16)


__all__ = [
    "REGION",
    "artifact_for",
    "make_spec",
    "math",
    "rel_error",
    "run_steps",
    "small_spec",
    "torch_reference",
]
