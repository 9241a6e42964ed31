"""A job is a project folder (issue 28's "done means"): a project with a helper package, a 68 MB
.npy and a data_utils.py that memory-maps it (a path relative to its own file) and reads a
label file relative to the working directory trains through `sam submit` on the embedded
cluster (server, scheduler, compile and wafer worker processes) with eager PyTorch's losses; a
resubmit of the unchanged project sends no file bytes."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

import click.testing
import httpx
import numpy as np
import pytest
import torch

from client.cli import build_cli
from client.jobspec import load_job_file
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec
from tests.e2e.local_cluster import TINY, running_cluster

pytestmark = pytest.mark.slow
ADMIN = {"Authorization": "Bearer sam-admin-project"}
ROWS, FEATURES, STEPS, BATCH = 17_000, 1_000, 12, 64  # x.npy: 17,000 x 1,000 float32 = 68 MB

JOB = f"""name: project-npy
model: {{file: model.py, class: Net, kwargs: {{features: {FEATURES}}}}}
data:
  source: file
  file: data_utils.py
  function: make_batch
  task: classification
  input_shape: [{FEATURES}]
  num_classes: 4
  batch_size: {BATCH}
train: {{loss: cross_entropy, optimizer: {{name: sgd, lr: 0.05}}, seed: 0}}
run_options: {{steps_per_epoch: {STEPS}, checkpoint_enabled: false}}
resources: {{region: {{rows: 8, cols: 8}}, time_limit: 10m}}
"""
MODEL = """import torch.nn as nn

from nets.layers import Block


class Net(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.body = Block(features, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.body(x))
"""
LAYERS = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x))
"""
DATA_UTILS = """import os

import numpy as np

from nets.scaling import standardize

HERE = os.path.dirname(os.path.abspath(__file__))
X = None


def make_batch(step, batch_size):
    global X
    if X is None:
        X = np.load(os.path.join(HERE, "data", "x.npy"), mmap_mode="r")  # beside this file
    labels = np.load("data/y.npy", mmap_mode="r")  # relative to the working directory
    rows = (step * batch_size + np.arange(batch_size)) % len(X)
    return standardize(np.asarray(X[rows])), np.asarray(labels[rows])
"""
SCALING = """import numpy as np


def standardize(x):
    return ((x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)).astype(
        np.float32
    )
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("project-cluster")
    with running_cluster(root, TINY, admin_token="sam-admin-project") as c:
        yield c


def _project(root: Path) -> Path:
    files = {
        "job.yaml": JOB,
        "model.py": MODEL,
        "data_utils.py": DATA_UTILS,
        "nets/__init__.py": "",
        "nets/layers.py": LAYERS,
        "nets/scaling.py": SCALING,
        ".samignore": "scratch/\n",
        "scratch/notes.txt": "left out",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "data").mkdir()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, FEATURES), dtype=np.float32)
    np.save(root / "data" / "x.npy", x)
    np.save(root / "data" / "y.npy", np.argmax(x[:, :4], axis=1).astype(np.int64))
    return root / "job.yaml"


def _sam(c, token: str, *args: str) -> click.testing.Result:  # type: ignore[no-untyped-def]
    return click.testing.CliRunner().invoke(
        build_cli(), ["--url", c.url, "--token", token, *args], catch_exceptions=False
    )


def _wait(c, token: str, job_id: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        c.watch()
        job = httpx.get(
            f"{c.url}/api/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
        ).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not end")


def _eager(project: Path, job_file: Path) -> list[float]:
    """The same training in eager PyTorch, with the project's own modules."""
    raw, _ = load_job_file(job_file)
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    sys.path.insert(0, str(project))
    try:
        for name in ("nets", "nets.layers", "nets.scaling", "model", "data_utils"):
            sys.modules.pop(name, None)
        model_module, data_module = (
            importlib.import_module("model"),
            importlib.import_module("data_utils"),
        )
        torch.manual_seed(spec["train"]["seed"])
        model = model_module.Net(**spec["model"]["kwargs"])
        optimizer = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(
            model.parameters()
        )
        losses = []
        for step in range(STEPS):
            x, y = data_module.make_batch(step, BATCH)
            loss = compute_loss(
                spec["train"]["loss"], model(torch.from_numpy(x)), torch.from_numpy(y)
            )
            losses.append(float(loss.detach()))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return losses
    finally:
        sys.path.remove(str(project))
        for name in ("nets", "nets.layers", "nets.scaling", "model", "data_utils"):
            sys.modules.pop(name, None)


def test_a_project_with_a_package_and_a_68_mb_npy_trains_with_eager_losses(
    cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    httpx.post(
        f"{cluster.url}/api/v1/tenants", json={"name": "proj"}, headers=ADMIN
    ).raise_for_status()
    made = httpx.post(f"{cluster.url}/api/v1/tenants/proj/users", json={"name": "u"}, headers=ADMIN)
    token = str(made.json()["token"])
    job_file = _project(tmp_path / "project")
    assert (job_file.parent / "data" / "x.npy").stat().st_size >= 68_000_000
    dry = _sam(cluster, token, "submit", "--dry-run", str(job_file))
    assert dry.exit_code == 0 and "data/x.npy" in dry.stdout and "scratch" not in dry.stdout
    first = _sam(cluster, token, "submit", "--parsable", str(job_file))
    assert first.exit_code == 0, first.output
    assert "project: 9 files, 65." in first.stderr and "(sent 65." in first.stderr
    job = _wait(cluster, token, first.stdout.strip())
    assert job["state"] == "succeeded", (job.get("error"), job)
    steps = httpx.get(
        f"{cluster.url}/api/v1/jobs/{job['id']}/metrics",
        headers={"Authorization": f"Bearer {token}"},
    ).json()["steps"]
    monkeypatch.chdir(job_file.parent)  # data_utils reads data/y.npy from the working directory
    np.testing.assert_allclose(
        [s["loss"] for s in steps], _eager(job_file.parent, job_file), rtol=1e-3
    )
    # the unchanged project again: no file bytes go, and the job is queued
    again = _sam(cluster, token, "submit", "--parsable", str(job_file))
    assert again.exit_code == 0 and "project:" not in again.stderr, again.output
