"""Projects that read real data, on the embedded cluster (server, scheduler, compile and wafer
worker processes): the seed's project layout (examples/seed_project: data_utils.py reading
scikit-learn's digits, checked requirements.txt) and a job reading a tenant's data set
memory-mapped at /datasets/NAME, both with eager PyTorch's losses."""

from __future__ import annotations

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
from sam_server.storage.layout import tenant_dataset_dir
from tests.e2e.local_cluster import TINY, running_cluster

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed_project"
ADMIN = {"Authorization": "Bearer sam-admin-data"}
NPY_DATA = """from compiler.feed import NpyFeed

FEED = None


def make_batch(step, batch_size):
    global FEED
    if FEED is None:
        FEED = NpyFeed("/datasets/points/x.npy", "/datasets/points/y.npy")
    return FEED.batch(step, batch_size)
"""
NPY_MODEL = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("data-cluster")
    with running_cluster(root, TINY, admin_token="sam-admin-data") as c:
        yield c


def _user(c, tenant: str) -> str:  # type: ignore[no-untyped-def]
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{tenant}/users", json={"name": "u"}, headers=ADMIN)
    r.raise_for_status()
    return str(r.json()["token"])


def _wait(c, token: str, job_id: str, timeout: float = 400) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {token}"}
    while time.monotonic() < deadline:
        c.watch()
        job = httpx.get(f"{c.url}/api/v1/jobs/{job_id}", headers=headers).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end; last {job}")


def _losses(c, token: str, job_id: str) -> list[float]:  # type: ignore[no-untyped-def]
    r = httpx.get(
        f"{c.url}/api/v1/jobs/{job_id}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    return [float(s["loss"]) for s in r.json()["steps"]]


def _eager(spec: dict[str, Any], model_py: str, make_batch: Any, steps: int) -> list[float]:
    namespace: dict[str, Any] = {}
    exec(compile(model_py, "model.py", "exec"), namespace)  # noqa: S102 - the test's own file
    torch.manual_seed(spec["train"]["seed"])
    model = namespace[spec["model"]["class"]](**spec["model"]["kwargs"])
    optimizer = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(
        model.parameters()
    )
    losses = []
    for step in range(steps):
        inputs, targets = (torch.from_numpy(np.asarray(a)) for a in make_batch(step))
        loss = compute_loss(spec["train"]["loss"], model(inputs), targets)
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


def test_seed_project_trains_on_digits_with_eager_losses(cluster) -> None:  # type: ignore[no-untyped-def]
    token = _user(cluster, "seedlab")
    result = click.testing.CliRunner().invoke(
        build_cli(),
        ["--url", cluster.url, "--token", token, "submit", str(EXAMPLE / "job.yaml"), "--parsable"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    job = _wait(cluster, token, result.stdout.strip())
    assert job["state"] == "succeeded", (job.get("error"), job.get("error_kind"), job)
    raw, files = load_job_file(EXAMPLE / "job.yaml")
    assert "requirements.txt" in files  # sent beside job.yaml and checked at submit
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    namespace: dict[str, Any] = {}
    exec(compile(files["data_utils.py"], "data_utils.py", "exec"), namespace)  # noqa: S102
    batch = spec["data"]["batch_size"]
    expected = _eager(spec, files["model.py"], lambda s: namespace["make_batch"](s, batch), 20)
    np.testing.assert_allclose(_losses(cluster, token, job["id"]), expected, rtol=1e-3)
    assert expected[-1] < expected[0]  # it learns the digits


def test_a_job_reads_its_tenants_dataset_memmapped(cluster) -> None:  # type: ignore[no-untyped-def]
    token = _user(cluster, "points")
    root = tenant_dataset_dir(cluster.settings.data_dir, "points", "points")
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 16)).astype(np.float32)
    np.save(root / "x.npy", x)
    np.save(root / "y.npy", np.argmax(x[:, :4], axis=1).astype(np.int64))
    spec = {
        "name": "points",
        "model": {"file": "model.py", "class": "Net"},
        "data": {
            "source": "file",
            "file": "data.py",
            "function": "make_batch",
            "dataset": "points",
            "task": "classification",
            "input_shape": [16],
            "num_classes": 4,
            "batch_size": 64,
        },
        "train": {"loss": "cross_entropy", "optimizer": {"name": "sgd", "lr": 0.1}},
        "run_options": {"steps_per_epoch": 12, "checkpoint_enabled": False},
        "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
    }
    r = httpx.post(
        f"{cluster.url}/api/v1/jobs",
        json={"spec": spec, "files": {"model.py": NPY_MODEL, "data.py": NPY_DATA}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 201, r.text
    job = _wait(cluster, token, r.json()["id"])
    assert job["state"] == "succeeded", (job.get("error"), job.get("error_kind"), job)
    full = JobSpec.model_validate(spec).model_dump(mode="json", by_alias=True)
    x_all, y_all = np.load(root / "x.npy"), np.load(root / "y.npy")

    def batches(step: int) -> tuple[np.ndarray, np.ndarray]:
        return x_all[step * 64 : step * 64 + 64], y_all[step * 64 : step * 64 + 64]

    expected = _eager(full, NPY_MODEL, batches, 12)
    np.testing.assert_allclose(_losses(cluster, token, job["id"]), expected, rtol=1e-3)
