"""Benchmark: compile time (cold and cached), simulator wall time per training step, the same step
in plain PyTorch eager, their ratio, and simulated cycles per step, for the mlp, cnn and gpt built-ins.

Run: `.venv/bin/python benchmarks/train_step.py [--steps N]`. Both sides run single-threaded
(torch.set_num_threads(1); the simulator is numpy on one core), so the ratio compares like with
like on a shared machine. The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import wse_sim.runtime as rt
from compiler import compile_job
from compiler.artifact import load_artifact
from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec
from wse_sim import Wafer

MODELS = {
    "mlp": {
        "region": (32, 32),
        "data": {
            "task": "classification",
            "input_shape": [784],
            "num_classes": 10,
            "batch_size": 64,
        },
    },
    "cnn": {
        "region": (32, 32),
        "data": {
            "task": "classification",
            "input_shape": [1, 28, 28],
            "num_classes": 10,
            "batch_size": 32,
        },
    },
    "gpt": {
        "region": (64, 64),
        "data": {
            "task": "language_model",
            "input_shape": [32],
            "num_classes": 64,
            "batch_size": 16,
        },
    },
}


def spec_for(name: str) -> dict[str, Any]:
    """The benchmark's job spec for a built-in (Adam, float32, pipelined)."""
    raw = {
        "name": f"bench-{name}",
        "model": {"builtin": name},
        "data": {"source": "synthetic", **MODELS[name]["data"]},
        "train": {"optimizer": {"name": "adam", "lr": 0.001}, "seed": 0},
        "resources": {"region": dict(zip(("rows", "cols"), MODELS[name]["region"], strict=False))},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def _region(spec: dict[str, Any]) -> tuple[int, int]:
    return MODELS[spec["model"]["builtin"]]["region"]


def time_compile(spec: dict[str, Any], cache_dir: Path) -> tuple[float, float, Path]:
    """(cold seconds, best cached seconds of 5, artifact dir)."""
    start = time.perf_counter()
    result = compile_job(spec, {}, region=_region(spec), cache_dir=cache_dir)
    cold = time.perf_counter() - start
    cached = []
    for _ in range(5):
        start = time.perf_counter()
        hit = compile_job(spec, {}, region=_region(spec), cache_dir=cache_dir)
        cached.append(time.perf_counter() - start)
        assert hit.cache_hit
    return cold, min(cached), result.artifact_dir


def time_simulator(artifact_dir: Path, spec: dict[str, Any], steps: int) -> tuple[float, int]:
    """(wall seconds per step after warm-up, simulated cycles per step)."""
    rows, cols = _region(spec)
    job = rt.load(
        load_artifact(artifact_dir),
        Wafer("wse2", rows=rows, cols=cols),
        (0, 0, rows, cols),
        "bench",
    )
    batches = [synthetic_batch(spec, k) for k in range(steps + 2)]
    for x, y in batches[:2]:
        job.step(x, y)
    start = time.perf_counter()
    results = [job.step(x, y) for x, y in batches[2:]]
    return (time.perf_counter() - start) / steps, results[-1].sim_cycles


def time_torch(spec: dict[str, Any], steps: int) -> float:
    """Wall seconds per plain-PyTorch eager step (forward, backward, optimizer) after warm-up."""
    torch.manual_seed(0)
    model = BUILTIN_MODELS[spec["model"]["builtin"]](**builtin_kwargs(spec))
    optimizer = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(
        model.parameters()
    )
    batches = [tuple(map(torch.from_numpy, synthetic_batch(spec, k))) for k in range(steps + 2)]

    def one(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad()
        compute_loss("cross_entropy", model(x), y).backward()
        optimizer.step()

    for x, y in batches[:2]:
        one(x, y)
    start = time.perf_counter()
    for x, y in batches[2:]:
        one(x, y)
    return (time.perf_counter() - start) / steps


def main() -> None:
    """Measure every model and print a table, then the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    steps = parser.parse_args().steps
    torch.set_num_threads(1)
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        for name in MODELS:
            spec = spec_for(name)
            cold, cached, artifact_dir = time_compile(spec, Path(cache))
            sim_s, cycles = time_simulator(artifact_dir, spec, steps)
            torch_s = time_torch(spec, steps)
            figures[name] = {
                "compile_cold_s": round(cold, 4),
                "compile_cached_s": round(cached, 5),
                "sim_step_s": round(sim_s, 6),
                "torch_step_s": round(torch_s, 6),
                "sim_cycles_per_step": int(cycles),
            }
            print(
                f"{name}: compile cold {cold:.2f} s, cached {cached * 1e3:.1f} ms; step sim {sim_s * 1e3:.2f} ms, "
                f"torch {torch_s * 1e3:.2f} ms, ratio {sim_s / torch_s:.1f}x; {cycles} simulated cycles/step"
            )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
