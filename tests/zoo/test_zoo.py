"""Every examples/zoo model either trains on the wse_sim runtime with PyTorch eager's losses
(fp32, rtol 1e-3, every step, and BatchNorm running statistics too) or fails at compile with
unsupported_op / compile_oom naming the op or kernel. Models that expected.yaml says train must
keep matching, so CI fails when one regresses.

The whole zoo is slow on a small machine: tests marked `zoo_full` run only with SAM_ZOO=full
(the benchmark `benchmarks/model_zoo.py` always runs every model); the fast subset always runs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

from tests.zoo.harness import RTOL, expected_training, load_zoo_job, run_zoo_model, zoo_names

torch.set_num_threads(1)  # the machine is shared; threads only add contention
# 71 s together (with the folder check) on a loaded 2-core machine (shufflenet: depthwise/grouped conv, BatchNorm)
FAST = {"squeezenet1_1", "timm_resnet10t", "shufflenet_v2_x0_5"}
_CACHE = Path(tempfile.mkdtemp(prefix="sam-zoo-tests-"))


def _params() -> list:
    full = os.environ.get("SAM_ZOO") == "full"
    return [
        pytest.param(name, marks=() if name in FAST else pytest.mark.zoo_full)
        for name in zoo_names()
        if full or name in FAST
    ]


def test_zoo_folders_are_user_jobs_and_listed_in_expected() -> None:
    names = zoo_names()
    assert len(names) >= 12, names
    expected = expected_training()
    for name in names:
        job = load_zoo_job(name)  # a normal, validated SAM job spec
        assert "model.py" in job.files and job.spec["model"]["file"] == "model.py"
        assert job.steps >= 5
    missing = [n for n in expected if n not in names]
    assert not missing, f"expected.yaml names models with no zoo folder: {missing}"


@pytest.mark.parametrize("name", _params())
def test_zoo_model_trains_like_pytorch_or_names_its_blocking_op(name: str) -> None:
    result = run_zoo_model(name, _CACHE)
    want = expected_training().get(name)
    if result.verdict == "unsupported":
        assert result.blocking_op, result.message
        assert want != "train", f"{name} trained before; now blocked by {result.blocking_op}"
        return
    assert result.verdict == "train_match", (
        f"{name}: {result.verdict} {result.message} max rel error {result.max_rel_error} "
        f"(rtol {RTOL}); buffers {result.buffer_rel_error}; training moves eager's losses by "
        f"{result.training_effect} (must exceed rtol)\n"
        f"sim   {result.sim_losses}\ntorch {result.torch_losses}"
    )
    # a model whose loss never moves would match trivially: it must really train
    assert max(result.sim_losses) - min(result.sim_losses) > 1e-4, result.sim_losses
