"""Issue 29: a wafer worker runs its jobs side by side in one process, so what bounds one job's
host memory is the plan the trusted check makes of its artifact
(`compiler.artifact_check.host_bytes`), which the job reserves (`sam_worker.host_memory`). That plan must bound what a step really holds, or a job
passes its check and then grows the worker past what it reserved, into other tenants' share.

Windowed kernels (convolution, max pooling) copy every output's receptive field: kernel-area
times their output, which the plan counted as twice the largest value. A 15x15 filter on 32
channels planned 1.3 MiB and held 452 MiB; an honest tenant's model, no forgery needed. Grid
sampling's backward keeps 16 taps of 5 float64 arrays per output pixel (bicubic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler import compile_job, load_artifact
from compiler.artifact_check import check_artifact
from compiler.errors import HostOOM
from tests.compiler.conftest import user_model_spec
from tests.security.step_memory import traced_step_peak

REGION = (48, 48)
HEAD = """import torch
from torch import nn


class Warp(nn.Module):
    def __init__(self):
        super().__init__()
        self.grid = nn.Parameter(torch.rand(1, 48, 48, 2) * 2 - 1)

    def forward(self, x):
        grid = self.grid.expand(x.shape[0], -1, -1, -1)
        return nn.functional.grid_sample(x, grid, mode="bicubic", align_corners=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
"""
# (input shape, body, features the body leaves for the final nn.Linear)
MODELS = {
    "wide_filter": ([16, 16, 16], "nn.Conv2d(16, 1, 15, padding=7)", 256),
    "transposed": ([8, 8, 8], "nn.ConvTranspose2d(8, 8, 9, stride=2)", 8 * 23 * 23),
    "max_pool": (
        [8, 32, 32],
        "nn.Sequential(nn.Conv2d(8, 8, 1), nn.MaxPool2d(9, stride=1, padding=4))",
        8 * 32 * 32,
    ),
    "conv1d": ([16, 128], "nn.Conv1d(16, 2, 31, padding=15)", 256),
    "grid_sample": ([2, 16, 16], "Warp()", 2 * 48 * 48),
}


def _model(body: str, features: int) -> str:
    return HEAD + (
        f"        self.body = {body}\n"
        f"        self.fc = nn.Linear({features}, 10)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(self.body(x).flatten(1))\n"
    )


@pytest.mark.parametrize("case", sorted(MODELS))
def test_a_windowed_kernel_s_step_holds_no_more_than_its_plan(case: str, tmp_path: Path) -> None:
    shape, body, features = MODELS[case]
    spec = user_model_spec(data={"input_shape": shape, "batch_size": 4})
    files = {"model.py": _model(body, features)}
    path = Path(compile_job(spec, files, region=REGION, cache_dir=tmp_path).artifact_dir)
    artifact = load_artifact(path)
    rows, cols = REGION
    planned = check_artifact(
        artifact, rows=rows, cols=cols, arch="wse2", max_host_bytes=1 << 34
    ).host_bytes
    held = sum(t.nbytes for t in artifact.tensors.values()) + traced_step_peak(
        artifact, spec, REGION
    )
    assert held <= planned < 4 * held, (held, planned)
    # A worker that gives one job less than the step holds refuses it before it runs.
    with pytest.raises(HostOOM) as caught:
        check_artifact(artifact, rows=rows, cols=cols, arch="wse2", max_host_bytes=held)
    assert caught.value.kind == "host_oom"
