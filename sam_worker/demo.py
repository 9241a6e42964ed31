"""`sam demo`: start the local cluster, create tenants, submit jobs of several priorities that
share a wafer, show the queue and the cluster as they run, and end with their results."""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any

import click
import httpx

from sam_server.config import get_settings
from sam_server.states import ENDED, JobState
from sam_worker.supervisor import _SAM, Cluster

USER_MODEL = '''\
import torch
import torch.nn as nn


class TinyRegressor(nn.Module):
    """An ordinary PyTorch model, written the usual way."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)
'''


def demo_jobs() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """(tenant, spec, files) of the tour's jobs: three families, three priorities, two tenants.

    The two mlp jobs compile to the same program: the second reuses the first's artifact, both
    become ready in the same scheduling cycle, and share a wafer side by side. They belong to one
    tenant because compiled artifacts are reused only within a tenant (another tenant's twin
    compiles afresh, and on a quiet machine the first job could end before it starts).
    """
    mlp = ({"builtin": "mlp", "kwargs": {"hidden": 512}}, {"batch_size": 64})
    adam = {"optimizer": {"name": "adam", "lr": 0.001}}
    adamw = {"optimizer": {"name": "adamw", "lr": 0.001}}
    sgd = {"optimizer": {"name": "sgd", "lr": 0.05}}
    user_model = {"file": "model.py", "class": "TinyRegressor", "kwargs": {"width": 32}}
    user_data = {"task": "regression", "input_shape": [16], "batch_size": 32}
    user_train = {"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9}}
    gpt = _spec("gpt-normal", "normal", {"builtin": "gpt"}, {"batch_size": 8}, adamw, (48, 48))
    cnn = _spec("cnn-normal", "normal", {"builtin": "cnn"}, {"batch_size": 16}, sgd, (32, 48))
    user = _spec("user-model-low", "low", user_model, user_data, user_train, 256)
    return [
        ("demo-physics", _spec("mlp-high", "high", *mlp, adam, (32, 32)), {}),
        ("demo-physics", _spec("mlp-twin-normal", "normal", *mlp, adam, (32, 32)), {}),
        ("demo-physics", gpt, {}),
        ("demo-biology", cnn, {}),
        ("demo-biology", user, {"model.py": USER_MODEL}),
    ]


def _spec(
    name: str,
    priority: str,
    model: dict[str, Any],
    data: dict[str, Any],
    train: dict[str, Any],
    size: tuple[int, int] | int,
) -> dict[str, Any]:
    """A tour job's spec: 150 steps with a checkpoint every 50, on a (rows, cols) region or on
    `size` PEs."""
    if isinstance(size, int):
        resources: dict[str, object] = {"pes": size}
    else:
        resources = {"region": {"rows": size[0], "cols": size[1]}}
    return {
        "name": name,
        "priority": priority,
        "model": model,
        "data": data,
        "train": train,
        "run_options": {"num_epochs": 1, "steps_per_epoch": 150, "checkpoint_every": 50},
        "resources": resources,
    }


class Tour:
    """The demo's HTTP calls, as the admin and as each tenant's user."""

    def __init__(self, url: str, admin_token: str) -> None:
        self.url = url
        self.admin = {"Authorization": f"Bearer {admin_token}"}
        self.tokens: dict[str, str] = {}

    def setup_tenants(self) -> None:
        suffix = uuid.uuid4().hex[:4]
        for tenant, quota in (("demo-physics", {"share": 2}), ("demo-biology", {"max_pes": 8192})):
            r = httpx.post(
                f"{self.url}/api/v1/tenants",
                json={"name": tenant, "quota": quota},
                headers=self.admin,
            )
            if r.status_code not in (201, 409):
                r.raise_for_status()
            r = httpx.post(
                f"{self.url}/api/v1/tenants/{tenant}/users",
                json={"name": f"{tenant}-user-{suffix}"},
                headers=self.admin,
            )
            r.raise_for_status()
            self.tokens[tenant] = r.json()["token"]
            _say(f"  tenant {tenant:<12}  user {r.json()['name']}  quota {quota}")

    def submit(self, tenant: str, spec: dict[str, Any], files: dict[str, str]) -> str:
        r = httpx.post(
            f"{self.url}/api/v1/jobs",
            json={"spec": spec, "files": files},
            headers={
                "Authorization": f"Bearer {self.tokens[tenant]}",
                "Idempotency-Key": uuid.uuid4().hex,
            },
        )
        r.raise_for_status()
        job_id: str = r.json()["id"]
        return job_id

    def job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, object] = httpx.get(
            f"{self.url}/api/v1/jobs/{job_id}", headers=self.admin
        ).json()
        return job

    def metrics(self, job_id: str) -> dict[str, Any]:
        metrics: dict[str, object] = httpx.get(
            f"{self.url}/api/v1/jobs/{job_id}/metrics", headers=self.admin
        ).json()
        return metrics


def _show(cluster: Cluster, token: str, *args: str) -> None:
    """Run `sam ARGS` against the cluster, its output in line with the tour's."""
    env = cluster.env() | {"SAM_URL": cluster.url, "SAM_TOKEN": token}
    subprocess.run([*_SAM, *args], env=env, check=False, timeout=30)


def _say(text: str = "") -> None:
    """One line of the tour, on stdout (click flushes it, so `sam` subprocesses stay in order)."""
    click.echo(text)


def run_demo(*, port: int = 8000, keep: bool = False, timeout_s: float = 600) -> bool:
    """Run the tour; True if every demo job succeeded and two shared a wafer at the same time."""
    settings = get_settings()
    cluster = Cluster(settings, port=port)
    _say(f"starting the local cluster in {settings.data_dir.resolve()} ...")
    cluster.start()
    try:
        cluster.wait_ready(timeout=120)
        admin_token = settings.ensure_admin_token()
        _cluster_up(cluster, admin_token)
        ok = _tour(cluster, admin_token, timeout_s)
    finally:
        if not keep:
            cluster.stop()
    if keep:
        _say(f"the cluster keeps running at {cluster.url}; Ctrl-C stops it")
    return ok


def _cluster_up(cluster: Cluster, admin_token: str) -> None:
    """What came up: the processes, where they keep their state, the wafers."""
    settings = cluster.settings
    view = httpx.get(
        f"{cluster.url}/api/v1/cluster", headers={"Authorization": f"Bearer {admin_token}"}
    ).json()
    workers = [p.name for p in cluster.parts if p.name.startswith(("compile-", "wafer-"))]
    _say(f"  up at {cluster.url}: server, scheduler, {', '.join(workers)}")
    _say(f"  database {settings.shown_database_url}, broker {settings.resolved_broker_url}")
    _say(f"  each process logs to {(settings.data_dir / 'logs').resolve()}/")
    for wafer in view["wafers"]:
        _say(f"  wafer {wafer['id']}: {wafer['arch']}, {wafer['rows']}x{wafer['cols']} PEs")


def _tour(cluster: Cluster, admin_token: str, timeout_s: float) -> bool:
    tour = Tour(cluster.url, admin_token)
    _say("\n== tenants and users")
    tour.setup_tenants()
    _say("\n== submitting jobs")
    ids = {}
    for tenant, spec, files in demo_jobs():
        ids[tour.submit(tenant, spec, files)] = tenant
        size = spec["resources"].get("region") or {"pes": spec["resources"]["pes"]}
        shape = f"{size['rows']}x{size['cols']} PEs" if "rows" in size else f"{size['pes']} PEs"
        _say(f"  {tenant:<12}  {spec['name']:<16} priority {spec['priority']:<7} {shape}")
    _say("\n== the jobs as they run")
    seen: dict[str, str] = {}
    shown = False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cluster.watch()
        jobs = {j: tour.job(j) for j in ids}
        for job_id, job in jobs.items():
            if seen.get(job_id) != job["state"]:
                seen[job_id] = job["state"]
                _event(job)
        running = [j for j in jobs.values() if j["state"] == JobState.RUNNING]
        if not shown and len(running) >= 2:
            _say(f"\n== sam queue --all   (while {len(running)} jobs run at once)")
            _show(cluster, admin_token, "queue", "--all")
            _say("\n== sam cluster --no-map")
            _show(cluster, admin_token, "cluster", "--no-map")
            _say()
            shown = True
        if all(job["state"] in ENDED for job in jobs.values()):
            break
        time.sleep(0.5)
    return _results(tour, ids, cluster)


def _event(job: dict[str, Any]) -> None:
    """A line for a job that reached a state worth telling: placed, or ended."""
    state, region = job["state"], job.get("region")
    if state == JobState.RUNNING and region:
        at = f"({region['row']},{region['col']}), {region['rows']}x{region['cols']}"
        _say(
            f"  {time.strftime('%H:%M:%S')}  {job['name']:<16} running on {region['wafer']} at {at}"
        )
    elif state in ENDED:
        _say(f"  {time.strftime('%H:%M:%S')}  {job['name']:<16} {state}")


def _results(tour: Tour, ids: dict[str, str], cluster: Cluster) -> bool:
    from sam_worker.checks import overlapping_pairs

    _say("\n== results")
    ok = True
    names: dict[str, str] = {}
    for job_id in ids:
        job, metrics = tour.job(job_id), tour.metrics(job_id)
        names[job_id] = job["name"]
        steps = metrics.get("steps", [])
        first = steps[0]["loss"] if steps else float("nan")
        last = steps[-1]["loss"] if steps else float("nan")
        rate = steps[-1]["samples_per_sec"] if steps else 0.0
        err = (
            f"  error: {job['error']['kind']}: {job['error']['message']}"
            if job.get("error")
            else ""
        )
        _say(
            f"  {job['name']:<16} {job['state']:<10} steps {len(steps):>3}  loss {first:.4f} -> "
            f"{last:.4f}  {rate:,.0f} samples/s simulated{err}"
        )
        ok = ok and job["state"] == JobState.SUCCEEDED
    shared = overlapping_pairs(cluster.settings.resolved_database_url, list(ids))
    for a, b, wafer in shared[:3]:
        _say(
            f"  {names[a]} and {names[b]} ran at the same time on wafer {wafer}, in disjoint regions"
        )
    if not shared:
        _say("  no two demo jobs shared a wafer at the same time")
    ok = ok and bool(shared)
    _say("\ndemo succeeded" if ok else "\ndemo FAILED")
    if ok:
        _say(
            "next: README.md's 'A first job': `sam up &`, then `sam submit examples/mlp/job.yaml --wait`"
        )
    return ok
