"""The seed's configuration end to end, on the embedded cluster (real server, scheduler, compile
and wafer worker processes): `sam submit --config`, checkpoints in checkpoint_dir, epoch
summaries, `sam fetch` of weights that match eager PyTorch, tenant isolation of results, a job
started from another's checkpoint, and an input-bound job."""

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
from compiler.data import synthetic_batch
from compiler.training import OptimizerConfig, compute_loss
from sam_server.schemas.job_spec import JobSpec
from tests.e2e.local_cluster import TINY, running_cluster

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed"
ADMIN = {"Authorization": "Bearer sam-admin-seed"}
SLOW_DATA = """
import time
import numpy as np

def make_batch(step, batch_size):
    time.sleep(0.05)  # a slow data source: the wafer must wait for it
    rng = np.random.default_rng(step)
    return rng.standard_normal((batch_size, 8)).astype(np.float32), rng.standard_normal(
        (batch_size, 1)).astype(np.float32)
"""
SLOW_MODEL = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("seed-cluster")
    with running_cluster(root, TINY, admin_token="sam-admin-seed") as c:
        yield c


def _user(c, tenant: str, name: str) -> str:  # type: ignore[no-untyped-def]
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{tenant}/users", json={"name": name}, headers=ADMIN)
    r.raise_for_status()
    return str(r.json()["token"])


def _sam(c, token: str, *args: str) -> click.testing.Result:  # type: ignore[no-untyped-def]
    result = click.testing.CliRunner().invoke(
        build_cli(), ["--url", c.url, "--token", token, *args], catch_exceptions=False
    )
    return result


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


def _get(c, token: str, path: str) -> httpx.Response:  # type: ignore[no-untyped-def]
    return httpx.get(f"{c.url}/api/v1{path}", headers={"Authorization": f"Bearer {token}"})


def _eager(spec: dict[str, Any], files: dict[str, str], steps: int) -> tuple[list[float], Any]:
    """Plain PyTorch on the same batches: the loss of every step and the trained model."""
    namespace: dict[str, Any] = {}
    exec(compile(files["model.py"], "model.py", "exec"), namespace)  # noqa: S102 - test's own file
    torch.manual_seed(spec["train"]["seed"])
    model = namespace[spec["model"]["class"]](**spec["model"]["kwargs"])
    optimizer = OptimizerConfig.from_spec(spec["train"]["optimizer"]).torch_optimizer(
        model.parameters()
    )
    losses = []
    for step in range(steps):
        inputs, targets = (torch.from_numpy(a) for a in synthetic_batch(spec, step))
        loss = compute_loss(spec["train"]["loss"], model(inputs), targets)
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses, model


def test_seed_config_job_checkpoints_fetch_and_init_from(cluster, tmp_path: Path) -> None:
    alice, bob = _user(cluster, "lab", "alice"), _user(cluster, "rivals", "bob")
    submitted = _sam(cluster, alice, "submit", str(EXAMPLE / "job.yaml"), "--parsable")
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    job = _wait(cluster, alice, job_id)
    assert job["state"] == "succeeded", job

    # checkpoints land in checkpoint_dir, inside the tenant's space of the artifact store
    ckpt_dir = cluster.settings.data_dir.resolve() / "tenants" / "lab" / "checkpoints" / job_id
    assert sorted(p.name for p in ckpt_dir.glob("*.npz")) == [
        f"step-{s:08d}.npz" for s in (5, 10, 15, 20)
    ]

    # one summary per epoch (mean loss and accuracy), and no per-step lines at log_level INFO
    metrics = _get(cluster, alice, f"/jobs/{job_id}/metrics").json()
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    assert all(0.0 <= e["accuracy"] <= 1.0 and e["steps"] == 10 for e in metrics["epochs"])
    log = _get(cluster, alice, f"/jobs/{job_id}/logs").text
    assert "epoch 1/2: mean loss" in log and "epoch 2/2: mean loss" in log and "accuracy" in log
    assert "step 3:" not in log

    # sam fetch: the final weights load in torch and equal eager PyTorch's after 20 steps
    raw, files = load_job_file(EXAMPLE / "job.yaml")
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    out = tmp_path / "fetched"
    fetched = _sam(cluster, alice, "fetch", job_id, "-d", str(out))
    assert fetched.exit_code == 0, fetched.output
    assert (out / "report.json").is_file() and (out / "checkpoints" / "step-00000010.npz").is_file()
    weights = torch.load(out / "weights.pt", weights_only=True)
    losses, model = _eager(spec, files, 20)
    expected = model.state_dict()
    assert set(weights) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(weights[name], value, rtol=1e-3, atol=1e-5)
    sim_losses = [s["loss"] for s in metrics["steps"]]
    np.testing.assert_allclose(sim_losses, losses, rtol=1e-3)

    # another tenant sees none of it
    for path in ("artifacts", "weights", "checkpoints/10"):
        assert _get(cluster, bob, f"/jobs/{job_id}/{path}").status_code == 404
    assert _sam(cluster, bob, "fetch", job_id, "-d", str(tmp_path / "bob")).exit_code == 1

    # a job started from the checkpoint of step 10 continues the loss sequence
    follow = dict(raw)
    follow["name"] = "seed-continued"
    follow["run_options"] = {
        **raw["run_options"],
        "num_epochs": 1,
        "checkpoint_dir": None,
        "init_from": {"job": job_id, "step": 10},
    }
    r = httpx.post(
        f"{cluster.url}/api/v1/jobs",
        json={"spec": follow, "files": files},
        headers={"Authorization": f"Bearer {alice}"},
    )
    assert r.status_code == 201, r.text
    second = _wait(cluster, alice, r.json()["id"])
    assert second["state"] == "succeeded", second
    continued = [
        s["loss"] for s in _get(cluster, alice, f"/jobs/{second['id']}/metrics").json()["steps"]
    ]
    np.testing.assert_allclose(continued, sim_losses[10:20], rtol=1e-4)
    # bob cannot start from alice's job: its id is unknown in his tenant
    r = httpx.post(
        f"{cluster.url}/api/v1/jobs",
        json={"spec": follow, "files": files},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert r.status_code == 422 and "init_from" in r.text


def test_a_slow_data_source_makes_the_job_input_bound(cluster) -> None:
    carol = _user(cluster, "slowdata", "carol")
    spec = {
        "name": "slow-data",
        "model": {"file": "model.py", "class": "Net"},
        "data": {"source": "file", "file": "data.py", "function": "make_batch", "batch_size": 8},
        "train": {"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.01}},
        "run_options": {"steps_per_epoch": 8, "checkpoint_enabled": False, "log_level": "DEBUG"},
        "data_loading": {"prefetch_depth": 2, "use_parallel_loader": False},
        "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
    }
    r = httpx.post(
        f"{cluster.url}/api/v1/jobs",
        json={"spec": spec, "files": {"model.py": SLOW_MODEL, "data.py": SLOW_DATA}},
        headers={"Authorization": f"Bearer {carol}"},
    )
    assert r.status_code == 201, r.text
    job = _wait(cluster, carol, r.json()["id"])
    assert job["state"] == "succeeded", job
    report = _get(cluster, carol, f"/jobs/{job['id']}/report").json()["run"]["input"]
    assert report["bound"] == "input-bound" and report["input_wait_fraction"] > 0.9
    assert report["mean_batch_load_s"] >= 0.04
    log = _get(cluster, carol, f"/jobs/{job['id']}/logs").text
    assert "input-bound" in log and "step 3:" in log  # DEBUG shows every step
