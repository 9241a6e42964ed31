"""The whole cluster on the real PostgreSQL and Redis with real Celery worker processes, started
from docker-compose.yml's own commands: a mixed two-tenant workload, then a fault drill."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobAttempt, Tenant
from sam_worker.checks import double_runs, region_conflicts
from tests.conftest import create_pg_database, drop_pg_database, free_port
from tests.integration.compose import ComposeProcesses, RedisServer

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

USER_MODEL = """
import torch.nn as nn

class Regressor(nn.Module):
    def __init__(self, width=24):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)
"""


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    db = create_pg_database()
    redis = RedisServer(free_port(), tmp_path / "redis")
    redis.start()
    extra = getattr(request, "param", {})
    procs = ComposeProcesses(db, redis.url, tmp_path / "data", free_port(), extra_env=extra)
    procs.redis = redis  # type: ignore[attr-defined]
    try:
        procs.start()
        yield procs
    finally:
        procs.stop()
        redis.stop()
        drop_pg_database(db)


def _tenant(c: ComposeProcesses, name: str, **quota: object) -> dict[str, str]:
    httpx.post(
        f"{c.url}/api/v1/tenants", json={"name": name, "quota": quota}, headers=c.admin()
    ).raise_for_status()
    r = httpx.post(
        f"{c.url}/api/v1/tenants/{name}/users", json={"name": f"{name}-u"}, headers=c.admin()
    )
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _spec(name: str, model: dict, rows: int, cols: int, steps: int, **extra: object) -> dict:  # type: ignore[type-arg]
    spec = {
        "name": name,
        "model": model,
        "resources": {"region": {"rows": rows, "cols": cols}, "time_limit": "20m"},
        "run_options": {"steps_per_epoch": steps, "checkpoint_every": 10},
    }
    spec.update(extra)
    return spec


def _submit(c: ComposeProcesses, who: dict[str, str], spec: dict, files: dict | None = None) -> str:  # type: ignore[type-arg]
    r = httpx.post(
        f"{c.url}/api/v1/jobs", json={"spec": spec, "files": files or {}}, headers=who, timeout=30
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _wait_all(c: ComposeProcesses, ids: list[str], timeout: float, during=None) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    deadline = time.monotonic() + timeout
    while True:
        c.revive()
        try:
            jobs = {
                j: httpx.get(f"{c.url}/api/v1/jobs/{j}", headers=c.admin(), timeout=30).json()
                for j in ids
            }
        except httpx.TransportError:  # the server is being restarted
            time.sleep(0.5)
            continue
        if all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs.values()):
            return jobs
        if during is not None:
            during(jobs)
        assert time.monotonic() < deadline, {
            j: (v["state"], v["progress"]) for j, v in jobs.items()
        }
        time.sleep(0.5)


def _quota_violations(url: str) -> list[str]:
    """Replay the recorded allocations: at no instant may a tenant exceed max_pes or max_running_jobs."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as s:
        tenants = {t.id: t for t in s.execute(select(Tenant)).scalars()}
        rows = list(s.execute(select(JobAttempt)).scalars())
    engine.dispose()
    events = defaultdict(list)
    for a in rows:
        events[a.tenant_id] += [
            (a.placed_at, 1, a.rows * a.cols),
            (a.ended_at, -1, -a.rows * a.cols),
        ]
    bad = []
    for tid, evs in events.items():
        t = tenants[tid]
        running = pes = 0
        for _, dn, dp in sorted(
            evs, key=lambda e: (e[0], e[1])
        ):  # ends before starts at equal times
            running, pes = running + dn, pes + dp
            if (t.max_pes and pes > t.max_pes) or (
                t.max_running_jobs and running > t.max_running_jobs
            ):
                bad.append(f"{t.name}: {running} jobs, {pes} PEs")
    return bad


def _runtime_losses(data_dir: Path, url: str, job_id: str, steps: int) -> list[float]:
    """The same job's losses computed directly by the runtime, outside the cluster."""
    import compiler
    from wse_sim import Wafer, runtime

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as s:
        job = s.get(Job, job_id)
        spec, files, key = job.spec, job.files, job.compile_key
    engine.dispose()
    artifact = compiler.load_artifact(data_dir / "artifacts" / key)
    loaded = runtime.load(artifact, Wafer("wse2", rows=64, cols=64), (0, 0, 32, 32), "check")
    batches = compiler.iter_batches(spec, files, 0)
    return [loaded.step(*next(batches)).loss for _ in range(steps)]


def test_two_tenants_mixed_jobs_all_succeed_within_quotas(cluster: ComposeProcesses):
    alpha = _tenant(cluster, "alpha", max_pes=3000, max_running_jobs=2, share=2)
    beta = _tenant(cluster, "beta", max_pes=2304, max_running_jobs=2)
    adam = {"loss": "cross_entropy", "optimizer": {"name": "adam", "lr": 0.001}}
    ids = [
        _submit(
            cluster,
            alpha,
            _spec("a-mlp", {"builtin": "mlp"}, 32, 32, 40, priority="high", train=adam),
        ),
        _submit(
            cluster, alpha, _spec("a-cnn", {"builtin": "cnn"}, 32, 48, 20, data={"batch_size": 8})
        ),
        _submit(
            cluster,
            alpha,
            _spec(
                "a-user",
                {"file": "m.py", "class": "Regressor"},
                16,
                16,
                30,
                data={"task": "regression", "input_shape": [12]},
                train={"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9}},
            ),
            {"m.py": USER_MODEL},
        ),
        _submit(
            cluster, alpha, _spec("a-compile", {"builtin": "mlp"}, 32, 32, 10, mode="compile_only")
        ),
        _submit(
            cluster, beta, _spec("b-gpt", {"builtin": "gpt"}, 48, 48, 15, data={"batch_size": 4})
        ),
        _submit(cluster, beta, _spec("b-mlp", {"builtin": "mlp"}, 32, 32, 30, priority="low")),
        _submit(
            cluster, beta, _spec("b-validate", {"builtin": "cnn"}, 32, 32, 10, mode="validate_only")
        ),
    ]
    jobs = _wait_all(cluster, ids, timeout=600)
    assert {j: v["state"] for j, v in jobs.items()} == {j: "succeeded" for j in ids}, jobs
    assert region_conflicts(cluster.database_url) == []
    assert _quota_violations(cluster.database_url) == []
    mlp = ids[0]
    reported = [
        s["loss"]
        for s in httpx.get(
            f"{cluster.url}/api/v1/jobs/{mlp}/metrics", headers=cluster.admin()
        ).json()["steps"]
    ]
    assert len(reported) == 40
    expected = _runtime_losses(cluster.data_dir, cluster.database_url, mlp, 40)
    np.testing.assert_allclose(reported, expected, rtol=1e-6)
    assert jobs[ids[3]]["region"] is None and jobs[ids[3]]["compile"] is not None


@pytest.mark.parametrize(
    "cluster",
    [{"SAM_LEASE_S": "6", "SAM_HEARTBEAT_S": "1", "SAM_MAX_ATTEMPTS": "10"}],
    indirect=True,
)
def test_killed_workers_and_restarted_redis_lose_nothing(cluster: ComposeProcesses):
    user = _tenant(cluster, "gamma")
    steps = 800
    model = {"builtin": "mlp", "kwargs": {"hidden": 512}}  # steps of tens of ms: time to hit them

    def wave(n: int) -> list[str]:
        return [
            _submit(
                cluster,
                user,
                _spec(
                    f"long-{n}-{i}",
                    model,
                    32,
                    32,
                    steps,
                    data={"batch_size": 64},
                    run_options={"steps_per_epoch": steps, "checkpoint_every": 20},
                ),
            )
            for i in range(4)
        ]

    faults = ["wafer-0", "scheduler", "wafer-1", "redis", "server", "wafer-0", "compile-1"]
    last = {"t": 0.0}

    def inject(jobs: dict) -> None:  # type: ignore[type-arg]
        running = [
            j for j in jobs.values() if j["state"] == "running" and j["progress"]["step"] > 30
        ]
        if not faults or not running or time.monotonic() - last["t"] < 2.5:
            return
        fault = faults.pop(0)
        if fault == "redis":
            cluster.redis.stop()  # type: ignore[attr-defined]
            time.sleep(1)
            cluster.redis.start()  # type: ignore[attr-defined]
        else:
            cluster.kill(fault)
        last["t"] = time.monotonic()

    # Faults go in only while a job is running; a fast machine may finish a wave before the
    # last one is in, so another wave of the same jobs follows until every fault has landed.
    ids: list[str] = []
    jobs: dict[str, dict] = {}  # type: ignore[type-arg]
    for n in range(6):
        batch = wave(n)
        ids += batch
        jobs.update(_wait_all(cluster, batch, timeout=900, during=inject))
        if not faults:
            break
    assert not faults, f"faults not injected: {faults}"
    assert {j: v["state"] for j, v in jobs.items()} == {j: "succeeded" for j in ids}, [
        (v["state"], v["attempts"], v["error"]) for v in jobs.values()
    ]
    assert double_runs(cluster.database_url) == []
    assert region_conflicts(cluster.database_url) == []
    engine = create_engine(cluster.database_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as s:
        attempts = list(s.execute(select(JobAttempt).order_by(JobAttempt.id)).scalars())
    engine.dispose()
    retried = [a for a in attempts if a.attempt > 1]
    assert retried, "no job was interrupted by the kills"
    assert any(a.start_step > 0 for a in retried), "no interrupted job resumed from a checkpoint"
    for job_id in ids:
        metrics = httpx.get(
            f"{cluster.url}/api/v1/jobs/{job_id}/metrics", headers=cluster.admin()
        ).json()
        assert [s["step"] for s in metrics["steps"]] == list(range(steps))
        assert all(math.isfinite(s["loss"]) for s in metrics["steps"])
