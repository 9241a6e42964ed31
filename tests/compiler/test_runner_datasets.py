"""A runner job reads a data set (docs/runner.md, "Data sets"): `sam.dataset_path(NAME)` is the
login node's copy with `local=True` and /datasets/NAME in the compile and data sandboxes, and
the wafer's losses over it are local=True's (fp32, rtol 1e-3), with a DataLoader whose
drop_last=True leaves out each epoch's short last batch."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import wse_sim.runtime as rt
from compiler import compile_job
from compiler.artifact import load_artifact
from compiler.data import iter_batches
from compiler.errors import CompileError
from sam_server.schemas.job_spec import JobSpec
from wse_sim import Wafer

SCRIPT = """
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from sam import Runner, dataset_path

torch.manual_seed(0)
folder = dataset_path("points")
data = TensorDataset(
    torch.from_numpy(np.load(folder / "x.npy")), torch.from_numpy(np.load(folder / "y.npy"))
)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)


def train_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


runner = Runner(model=model, loss_fn=criterion, optimizer=optimizer, datasets={NAMED})
result = runner.train(
    train_data_fn=lambda: DataLoader(data, batch_size=runner.batch_size, drop_last=True),
    num_epochs=2,
    train_step_fn=train_step,
)
"""
ROWS, BATCH = 100, 32  # three whole batches an epoch (runner.batch_size 32); 4 rows dropped


def _project(tmp_path: Path, named: str = '["points"]') -> tuple[Path, Path]:
    """(the project folder, the data set's folder: points/x.npy and y.npy)."""
    project, data = tmp_path / "project", tmp_path / "datasets" / "points"
    project.mkdir()
    data.mkdir(parents=True)
    (project / "train.py").write_text(SCRIPT.replace("{NAMED}", named))
    rng = np.random.default_rng(0)
    np.save(data / "x.npy", rng.standard_normal((ROWS, 4)).astype(np.float32))
    np.save(data / "y.npy", rng.integers(0, 3, ROWS).astype(np.int64))
    return project, data


def _spec(datasets: list[str]) -> dict[str, Any]:
    raw = {
        "name": "points",
        "entry": {"script": "train.py"},
        "data": {"batch_size": BATCH, "datasets": datasets},
        "run_options": {"num_epochs": 2, "steps_per_epoch": ROWS // BATCH},
        "resources": {"region": {"rows": 8, "cols": 8}},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def _local(project: Path, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    monkeypatch.setenv("SAM_RUNNER", "local")
    monkeypatch.setenv("SAM_DATASETS", str(project.parent / "datasets"))
    monkeypatch.chdir(project)
    found = runpy.run_path(str(project / "train.py"), run_name="__main__")
    return list(found["result"].losses)


def test_a_runner_script_trains_on_its_data_set_with_the_local_losses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, data = _project(tmp_path)
    local = _local(project, monkeypatch)
    assert len(local) == 2 * (ROWS // BATCH)
    spec = _spec(["points"])
    files = {"train.py": (project / "train.py").read_text()}
    result = compile_job(
        spec,
        files,
        region=(8, 8),
        cache_dir=tmp_path / "cache",
        project=project,
        datasets={"points": data},
    )
    assert result.artifact_dir is not None
    stream = iter_batches(spec, {}, 0, datasets={"points": data}, project=project)
    try:
        batches = [next(stream) for _ in range(len(local))]
    finally:
        stream.close()  # type: ignore[attr-defined]
    job = rt.load(load_artifact(result.artifact_dir), Wafer("wse2", 8, 8), (0, 0, 8, 8), "p")
    try:
        wafer = [float(job.step(x, y).loss) for x, y in batches]
    finally:
        job.release()
    np.testing.assert_allclose(wafer, local, rtol=1e-3)


def test_a_data_set_the_job_does_not_name_is_refused_at_compile(tmp_path: Path) -> None:
    project, data = _project(tmp_path, named="[]")
    files = {"train.py": (project / "train.py").read_text()}
    with pytest.raises(CompileError) as refused:
        compile_job(_spec([]), files, region=(8, 8), cache_dir=tmp_path / "cache", project=project)
    assert "Runner(..., datasets=['points'])" in refused.value.message, refused.value.message
