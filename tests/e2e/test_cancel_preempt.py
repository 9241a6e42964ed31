"""On the embedded cluster (SQLite, filesystem broker, real worker processes): a running job
stops within a few steps of `cancel` and frees its region; a higher class preempts a lower one,
which checkpoints, waits, and resumes from its checkpoint."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from sam_worker.checks import attempts, double_runs, region_conflicts
from tests.e2e.local_cluster import TINY, running_cluster

pytestmark = pytest.mark.slow


def _spec(name: str, steps: int, priority: str = "normal", hidden: int = 64) -> dict:  # type: ignore[type-arg]
    return {
        "name": name,
        "priority": priority,
        "model": {"builtin": "mlp", "kwargs": {"hidden": hidden}},
        "data": {"batch_size": 64},
        "run_options": {"steps_per_epoch": steps, "checkpoint_every": 10},
        "resources": {"region": {"rows": 64, "cols": 64}, "time_limit": "10m"},
    }


@pytest.fixture
def small_cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    with running_cluster(
        tmp_path, TINY, admin_token="sam-admin-e2e", SAM_PREEMPT_MIN_RUN_S="1"
    ) as cluster:
        yield cluster


def _setup(c) -> dict[str, str]:  # type: ignore[no-untyped-def]
    admin = {"Authorization": "Bearer sam-admin-e2e"}
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": "lab"}, headers=admin).raise_for_status()
    r = httpx.post(
        f"{c.url}/api/v1/tenants/lab/users", json={"name": "pi", "role": "admin"}, headers=admin
    )
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _job(c, who, job_id: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return httpx.get(f"{c.url}/api/v1/jobs/{job_id}", headers=who).json()


def _wait(c, who, job_id: str, predicate, timeout: float = 300) -> dict:  # type: ignore[no-untyped-def,type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c.watch()
        job = _job(c, who, job_id)
        if predicate(job):
            return job
        time.sleep(0.1)
    raise AssertionError(f"timed out; last state {job}")


def _submit(c, who, spec) -> str:  # type: ignore[no-untyped-def]
    r = httpx.post(f"{c.url}/api/v1/jobs", json={"spec": spec, "files": {}}, headers=who)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_cancel_stops_a_running_job_within_a_few_steps(small_cluster):
    c = small_cluster
    pi = _setup(c)
    job_id = _submit(c, pi, _spec("long", 3000, hidden=512))  # steps of tens of milliseconds
    running = _wait(
        c, pi, job_id, lambda j: j["state"] == "running" and j["progress"]["step"] >= 20
    )
    # How fast this machine runs the job's steps, so that "a few steps" means the same
    # amount of work on a slow machine and on a fast one.
    t0, s0 = time.monotonic(), running["progress"]["step"]
    time.sleep(1.0)
    r = httpx.post(f"{c.url}/api/v1/jobs/{job_id}/cancel", headers=pi)
    asked = time.monotonic()
    assert r.status_code == 202 and r.json()["state"] == "cancelling"
    at_request = r.json()["progress"]["step"]  # as last reported: up to a flush behind
    steps_per_s = (at_request - s0) / (asked - t0)
    done = _wait(c, pi, job_id, lambda j: j["state"] == "cancelled", timeout=60)
    assert time.monotonic() - asked < 5
    assert done["region"] is None
    # The worker polls its job's flags every 0.1 s and stops between steps: well under a
    # second's worth of steps after the request (at least 25, for very slow steps).
    steps_after = done["progress"]["step"] - at_request
    assert steps_after <= max(25, steps_per_s), (running["progress"], done["progress"], steps_per_s)
    assert done["progress"]["step"] < 3000  # it did stop: the job was far from done
    wafer = httpx.get(f"{c.url}/api/v1/cluster", headers=pi).json()["wafers"][0]
    assert wafer["allocations"] == [] and wafer["free_pes"] == 64 * 64


def test_higher_class_preempts_and_the_victim_resumes_from_its_checkpoint(small_cluster):
    c = small_cluster
    pi = _setup(c)
    # Same program for both (only name and priority differ), so the high job reuses the low
    # job's artifact and is ready to run the moment it is submitted.
    low = _submit(c, pi, _spec("low-long", 1000, "low", hidden=256))
    _wait(c, pi, low, lambda j: j["state"] == "running" and j["progress"]["step"] >= 30)
    high = _submit(c, pi, _spec("high-short", 1000, "high", hidden=256))
    assert (
        _wait(c, pi, high, lambda j: j["state"] in ("succeeded", "failed"))["state"] == "succeeded"
    )
    victim = _wait(c, pi, low, lambda j: j["state"] in ("succeeded", "failed"))
    assert victim["state"] == "succeeded" and victim["attempts"] == 2
    url = c.settings.resolved_database_url
    runs = [a for a in attempts(url, [low])]
    assert [a.outcome for a in runs] == ["preempted", "succeeded"]
    assert runs[1].start_step >= 10  # resumed from a checkpoint, not from step 0
    assert double_runs(url) == [] and region_conflicts(url) == []
    steps = httpx.get(f"{c.url}/api/v1/jobs/{low}/metrics", headers=pi).json()["steps"]
    assert [s["step"] for s in steps] == list(range(1000))


NAN_DATA = """
import numpy as np


def make_batch(step, batch_size):
    rng = np.random.default_rng(step)
    x = rng.uniform(-1, 1, size=(batch_size, 8)).astype(np.float32)
    if step == 3:
        x[0, 0] = np.nan  # an ordinary bug in a data source
    return x, x[:, :1].copy()
"""


def test_a_nan_loss_fails_the_job_numerical_at_that_step(small_cluster):
    """A NaN in step 3's batch: the job fails `numerical` at step 3 at once (not worker_lost
    after lease expiries), and its metrics keep that step with a null loss and its kind."""
    c, who = small_cluster, _setup(small_cluster)
    repo = Path(__file__).resolve().parents[2]
    spec = {
        "name": "nan-data",
        "model": {"file": "model.py", "class": "Regressor", "kwargs": {"features": 8}},
        "data": {"source": "file", "file": "data.py", "function": "make_batch", "batch_size": 16},
        "train": {"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.05}},
        "run_options": {"steps_per_epoch": 20},
        "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "10m"},
    }
    files = {"model.py": (repo / "examples/file_data/model.py").read_text(), "data.py": NAN_DATA}
    r = httpx.post(f"{c.url}/api/v1/jobs", json={"spec": spec, "files": files}, headers=who)
    assert r.status_code == 201, r.text
    job = _wait(c, who, r.json()["id"], lambda j: j["state"] in ("succeeded", "failed"), 300)
    assert job["state"] == "failed" and job["attempts"] == 1, job
    assert job["error"]["kind"] == "numerical" and "step 3" in job["error"]["message"]
    steps = httpx.get(f"{c.url}/api/v1/jobs/{job['id']}/metrics", headers=who).json()["steps"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert all(isinstance(s["loss"], float) for s in steps[:3])
    assert steps[3]["loss"] is None and steps[3]["loss_nonfinite"] == "nan"
