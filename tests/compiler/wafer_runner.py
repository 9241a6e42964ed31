"""Run a traced step on the wafer runtime's kernels (wse_sim.runtime) without compile_job's
sandbox and placement: the graph as one kernel over a small region (the numerics of a compiled
job, which only adds placement and timing)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

import wse_sim.runtime as rt
from compiler.frontend import TracedStep
from wse_sim import Wafer

REGION = (4, 4)


def wafer_steps(
    traced: TracedStep, spec: dict[str, Any], batches: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[list[float], dict[str, np.ndarray]]:
    """(loss of every step, final state by source name) of `traced` run on a simulated wafer."""
    for node in traced.graph["nodes"]:
        node["kernel"] = "k0"
    manifest = {
        "format": "sam-artifact/1",
        "region": {"rows": REGION[0], "cols": REGION[1]},
        "fp16": False,
        "batch_size": spec["data"]["batch_size"],
        "execution_mode": "pipelined",
        "train": spec["train"],
        "kernels": [
            {
                "id": "k0",
                "nodes": [n["name"] for n in traced.graph["nodes"]],
                "op": "elementwise",
                "rect": [0, 0, *REGION],
                "flops": 1000,
                "memory_per_pe": {"weights": 64},
            }
        ],
    }
    artifact = SimpleNamespace(manifest=manifest, graph=traced.graph, tensors=traced.tensors)
    job = rt.load(artifact, Wafer("wse2", rows=REGION[0], cols=REGION[1]), (0, 0, *REGION), "t")
    try:
        losses = [float(job.step(x, y).loss) for x, y in batches]
        return losses, job.state_dict()
    finally:
        job.release()
