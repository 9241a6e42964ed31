"""Activation recomputation (`compile_options.activation_recomputation`, gradient checkpointing):
the backward recomputes the activations the step kept only for it. The losses must stay those of
PyTorch eager (and those of the same job without recomputation to fp32 rounding), the activation
bytes must drop so that a model that does not fit a region without it fits with it, and the
recomputed work must cost cycles, in the compile estimate and in the simulated step.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import wse_sim.runtime as rt
from compiler import compile_job
from compiler.arch import get_arch_info
from compiler.artifact import load_artifact
from compiler.driver import trace_job
from compiler.errors import CompileOOM
from compiler.ir import validate_graph
from compiler.micro_batching import activation_bytes
from compiler.passes.fusion import fuse
from compiler.passes.recompute import forward_nodes, recompute_activations
from compiler.planner import compile_options
from sam_server.schemas.job_spec import JobSpec
from tests.zoo.harness import RTOL, ZooJob, batches, rel_error, torch_losses
from wse_sim import Wafer

# A wide GELU MLP: the hidden pre-activation [64, 1024] is read again only by gelu_backward, so
# it is what recomputation stops keeping (the GELU's output flows on to the next layer anyway).
MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int = 1024, classes: int = 10) -> None:
        super().__init__()
        self.up = nn.Linear(32, width)
        self.down = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.up(x)))
"""
FILES = {"model.py": MODEL}
TIGHT = (6, 8)  # too small for the step without recomputation, enough with it
ROOMY = (8, 8)  # both fit
STEPS = 5


def _spec(recompute: bool) -> dict[str, Any]:
    raw = {
        "name": "recompute",
        "model": {"file": "model.py", "class": "Net"},
        "data": {
            "source": "synthetic",
            "task": "classification",
            "input_shape": [32],
            "num_classes": 10,
            "batch_size": 64,
        },
        "train": {
            "loss": "cross_entropy",
            "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
            "seed": 0,
        },
        "run_options": {"steps_per_epoch": STEPS},
        "compile_options": {"activation_recomputation": recompute},
        "resources": {"region": {"rows": 8, "cols": 8}},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


@pytest.fixture(scope="module")
def cache() -> Path:
    return Path(tempfile.mkdtemp(prefix="sam-recompute-"))


@pytest.fixture(scope="module")
def graph() -> dict[str, Any]:
    return trace_job(_spec(False), FILES)[0]


def _run(spec: dict[str, Any], region: tuple[int, int], cache: Path) -> tuple[list, int, dict]:
    """(losses, simulated cycles of the run, compile summary) on a WSE-2 region."""
    result = compile_job(spec, FILES, region=region, cache_dir=cache)
    job = rt.load(
        load_artifact(result.artifact_dir),
        Wafer("wse2", rows=region[0], cols=region[1]),
        (0, 0, *region),
        "r",
    )
    data = batches(ZooJob("recompute", spec, FILES), STEPS)
    steps = [job.step(x, y) for x, y in data]
    return [s.loss for s in steps], sum(s.sim_cycles for s in steps), result.summary


def test_pass_keeps_only_what_the_forward_passes_on(graph: dict[str, Any]) -> None:
    options = compile_options(_spec(True))
    new, report = recompute_activations(graph)
    validate_graph(new)
    assert report.values == 1 and report.stashed_bytes == 64 * 1024 * 4
    before, after = activation_bytes(graph, options, 64), activation_bytes(new, options, 64)
    assert before - after == report.stashed_bytes, (before, after)
    # the copies run inside backward kernels: no kernel of their own, none in the forward pass
    assert len(fuse(new)) == len(fuse(graph))
    copies = [n for n in new["nodes"] if "recompute_for" in n]
    assert copies and not {n["name"] for n in copies} & forward_nodes(new)
    assert graph["nodes"] != new["nodes"] and "recompute_for" not in str(graph["nodes"])


def test_a_model_too_big_for_a_region_fits_with_recomputation(cache: Path) -> None:
    with pytest.raises(CompileOOM, match="activation_recomputation: true"):
        compile_job(_spec(False), FILES, region=TIGHT, cache_dir=cache)
    losses, _, summary = _run(_spec(True), TIGHT, cache)
    assert summary["activation_recomputation"]["stashed_bytes_freed"] == 64 * 1024 * 4
    job = ZooJob("recompute", _spec(True), FILES)
    assert rel_error(losses, torch_losses(job, batches(job, STEPS))[0]) < RTOL


def test_recomputation_gives_the_same_losses_and_costs_cycles(cache: Path) -> None:
    plain, plain_cycles, plain_summary = _run(_spec(False), ROOMY, cache)
    again, again_cycles, again_summary = _run(_spec(True), ROOMY, cache)
    # Same ops on the same values; a copied matmul runs on the backward kernel's rectangle, whose
    # blocking sums in another order, so the losses agree to fp32 rounding, not bit for bit.
    assert rel_error(again, plain) < 1e-5, (plain, again)
    assert len(set(np.round(plain, 6))) > 1  # and the weights do change between steps
    assert again_summary["flops_per_step"] > plain_summary["flops_per_step"]
    assert again_summary["estimated_cycles_per_step"] > plain_summary["estimated_cycles_per_step"]
    assert again_cycles > plain_cycles  # the simulator charges the recomputed kernels' FLOPs
    arch = get_arch_info("WSE-2")
    assert again_summary["memory"]["limit_bytes_per_pe"] == arch.sram_bytes


def test_dropout_masks_are_not_drawn_again(cache: Path) -> None:
    # Recomputing a dropout would draw another mask; its losses would then differ from the run
    # without recomputation (the runtime's masks depend on the node, so SAM's own run is the
    # reference here: eager draws from another generator).
    files = {"model.py": MODEL.replace("self.down(nn.functional.gelu(", "self.down(self.drop(")}
    files["model.py"] = files["model.py"].replace(
        "self.down = nn.Linear(width, classes)",
        "self.down = nn.Linear(width, classes)\n        self.drop = nn.Dropout(0.25)",
    )
    files["model.py"] = files["model.py"].replace(
        "self.drop(self.up(x)))", "self.drop(nn.functional.gelu(self.up(x))))"
    )
    runs = []
    for recompute in (False, True):
        spec = copy.deepcopy(_spec(recompute))
        result = compile_job(spec, files, region=ROOMY, cache_dir=cache)
        job = rt.load(
            load_artifact(result.artifact_dir), Wafer("wse2", rows=8, cols=8), (0, 0, 8, 8), "d"
        )
        runs.append([job.step(x, y).loss for x, y in batches(ZooJob("d", spec, files), STEPS)])
    assert rel_error(runs[1], runs[0]) < 1e-5, runs  # another mask would move them by ~1e-2
