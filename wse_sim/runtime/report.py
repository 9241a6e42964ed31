"""The performance report of a loaded job: throughput, per-kernel cycles, heatmaps, compile summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from wse_sim.runtime.job import LoadedJob


def _compile_summary(manifest: dict[str, Any]) -> dict[str, object]:
    """The manifest's compile facts a user reads first (sizes, estimates, memory)."""
    keys = (
        "compiler_version",
        "torch_version",
        "cache_key",
        "arch",
        "region",
        "execution_mode",
        "fp16",
        "batch_size",
        "estimated_cycles_per_step",
        "flops_per_step",
        "memory",
        "weight_streaming",
        "optimizer_state_offload",
        "micro_batches",
        "loss_scaling",
    )
    summary = {k: manifest[k] for k in keys if k in manifest}
    summary["kernels"] = len(manifest.get("kernels") or [])
    compiled = manifest.get("summary") or {}
    for key in ("activation_budget", "optimizer_offload"):
        if key in compiled:
            summary[key] = compiled[key]
    return summary


def _cycles_of_kind(job: LoadedJob, kind: str) -> int:
    """Simulated cycles per (micro-)step that the charges of `kind` took, over all kernels."""
    return int(sum(by_kind.get(kind, 0) for by_kind in job.charger.kernel_cycles.values()))


def _kernel_table(job: LoadedJob) -> list[dict[str, object]]:
    """Per kernel: op, rect, FLOPs, and simulated cycles per step by kind (compute, transfer, ...)."""
    cycles = job.charger.kernel_cycles
    rows = []
    for kernel in job.kernels:
        by_kind = cycles.get(kernel["id"], {})
        rows.append(
            {
                "id": kernel["id"],
                "op": kernel.get("op"),
                "rect": kernel.get("rect"),
                "flops": kernel.get("flops"),
                "cycles_per_step": by_kind,
                "total_cycles_per_step": int(sum(by_kind.values())),
                "estimated_cycles": kernel.get("est_cycles"),
            }
        )
    for extra in sorted(set(cycles) - {k["id"] for k in job.kernels}):
        rows.append(
            {
                "id": extra,
                "op": None,
                "rect": None,
                "flops": None,
                "cycles_per_step": cycles[extra],
                "total_cycles_per_step": int(sum(cycles[extra].values())),
            }
        )
    return rows


def report(job: LoadedJob, out_dir: Path) -> dict[str, Any]:
    """Write the heatmap PNGs and report.json under out_dir; returns the report (JSON-able).

    Keys: throughput {steps, sim_cycles, sim_seconds, cycles_per_step, samples_per_sec,
    host_wall_seconds_per_step (what simulating a step cost here, not wafer time)}, kernels
    (per-kernel cycles per step), utilization_mean, sram_high_water_bytes (max over PEs), compile
    (the manifest summary), heatmaps {utilization_png, sram_png}, heatmap_scales {utilization,
    sram: {min, max, unit}} (the ends of each picture's colour bar).
    """
    from wse_sim import report as heatmaps  # the simulator's report module (PNG writers)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    region = job.region
    steps = max(job.steps_run, 1)
    cycles_per_step = job.total_cycles / steps
    batch = job.batch_size
    result: dict[str, object] = {
        "throughput": {
            "steps": job.steps_run,
            "sim_cycles": int(job.total_cycles),
            "sim_seconds": job.total_cycles / job.clock_hz,
            "cycles_per_step": cycles_per_step,
            "samples_per_sec": (batch * job.clock_hz / cycles_per_step)
            if cycles_per_step
            else None,
            "host_wall_seconds_per_step": job.wall_seconds
            / steps,  # simulator cost, not wafer time
            # optimizer state streamed host <-> wafer (optimizer_state_offload), per step
            "offload_cycles_per_step": _cycles_of_kind(job, "offload") * job.micro_batches,
            "micro_batches": job.micro_batches,
        },
        "kernels": _kernel_table(job),
        "utilization_mean": float(np.mean(region.utilization())),
        "sram_high_water_bytes": int(np.max(region.xp.to_numpy(region.sram_hwm))),
        "compile": _compile_summary(job.manifest),
        "heatmaps": {
            "utilization_png": str(heatmaps.utilization_png(region, out / "utilization.png")),
            "sram_png": str(heatmaps.sram_png(region, out / "sram.png")),
        },
        # what each picture's colour bar spans: 0 .. the job's own maximum
        "heatmap_scales": heatmaps.heatmap_scales(region),
    }
    (out / "report.json").write_text(json.dumps(result, indent=1, default=_json_default))
    plain: dict[str, object] = json.loads(json.dumps(result, default=_json_default))
    return plain


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-able")
