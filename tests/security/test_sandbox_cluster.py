"""The hostile corpus as real tenant jobs on a real `sam up` cluster (SQLite, filesystem broker,
separate server, scheduler, compile and wafer worker processes, running as root here).

Each attack fails inside the attacker's own job with a clear error, no secret shows in what the
attacker can read back (its job's error and log), no process of the attacker outlives its job,
the workers stay up with bounded memory, and the victim's checkpoints are untouched. Honest
make_batch files (torch at the top, numpy only, a sibling import) train end to end.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from compiler.sandbox.seccomp import syscall_numbers
from tests.conftest import free_port
from tests.security.hostile import assert_contained, attack_source, parse_report
from tests.security.test_sandbox_unit import ROOT, marker_processes

pytestmark = pytest.mark.slow

ADMIN = "sam-admin-" + uuid.uuid4().hex
MODEL = """from torch import nn


class Regressor(nn.Module):
    def __init__(self, features: int = 8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)
"""
NUMPY_DATA = """import numpy as np


def make_batch(step, batch_size):
    rng = np.random.default_rng(step)
    x = rng.uniform(-1, 1, size=(batch_size, 8)).astype(np.float32)
    return x, np.sin(x[:, :1] * 3).astype(np.float32)
"""
TORCH_DATA = """import torch


def make_batch(step, batch_size):
    g = torch.Generator().manual_seed(step)
    x = torch.rand(batch_size, 8, generator=g) * 2 - 1
    return x, torch.sin(x[:, :1] * 3)
"""
SIBLING_DATA = """from helpers import features, target


def make_batch(step, batch_size):
    x = features(step, batch_size)
    return x, target(x)
"""
SIBLING = """import numpy as np


def features(step, batch_size):
    return np.random.default_rng(step).uniform(-1, 1, size=(batch_size, 8)).astype(np.float32)


def target(x):
    return (x[:, :1] * 0.5).astype(np.float32)
"""
# Honest while the compiler traces it (torch is loaded there), hostile on the wafer worker.
ON_WAFER = """import sys
import numpy as np


def make_batch(step, batch_size):
    if "torch" in sys.modules:
        return np.zeros((batch_size, 8), np.float32), np.zeros((batch_size, 1), np.float32)
{body}
"""
HEADER = """    out = sys.stdout.buffer
    header = b'{{"dtype": "<f4", "shape": {shape}}}'
    out.write(len(header).to_bytes(4, "little") + header)
    out.flush()
    import time
    time.sleep(300)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from sam_server.config import Settings
    from sam_worker.supervisor import Cluster

    tmp = tmp_path_factory.mktemp("hostile")
    cluster_file = tmp / "cluster.yaml"
    cluster_file.write_text("wafers:\n  - {id: w0, arch: wse2, rows: 64, cols: 64}\n")
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SAM_")}
    os.environ["SAM_CLUSTER"] = str(cluster_file)
    c = Cluster(Settings(data_dir=tmp / "data", admin_token=ADMIN), port=free_port())
    c.start()
    try:
        c.wait_ready(180)
        yield c
    finally:
        c.stop()
        os.environ.pop("SAM_CLUSTER", None)
        os.environ.update(saved)


def _tenant(c, name: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": name}, headers=admin).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{name}/users", json={"name": "u"}, headers=admin)
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


@pytest.fixture(scope="module")
def tenants(cluster) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    return {"attacker": _tenant(cluster, "attacker"), "victim": _tenant(cluster, "victim")}


def _spec(name: str, data: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "model": {"file": "model.py", "class": "Regressor"},
        "data": data or {"source": "file", "file": "data.py", "function": "make_batch"},
        "train": {"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.05}},
        "run_options": {"steps_per_epoch": 6, "checkpoint_every": 3},
        "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "10m"},
    }
    spec["data"].setdefault("batch_size", 16)
    spec.update(extra)
    return spec


def _submit(c, who, spec, files) -> str:  # type: ignore[no-untyped-def]
    r = httpx.post(f"{c.url}/api/v1/jobs", json={"spec": spec, "files": files}, headers=who)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _wait(c, who, job_id: str, predicate, timeout: float = 600) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline, job = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        c.watch()
        job = httpx.get(f"{c.url}/api/v1/jobs/{job_id}", headers=who).json()
        if predicate(job):
            return job
        time.sleep(0.2)
    raise AssertionError(f"timed out; last state {job}")


def _ended(job: dict[str, Any]) -> bool:
    return job["state"] in ("succeeded", "failed", "cancelled")


def _readable(c, who, job: dict[str, Any]) -> str:  # type: ignore[no-untyped-def]
    """Everything the tenant can read back about its job."""
    logs = httpx.get(f"{c.url}/api/v1/jobs/{job['id']}/logs", headers=who).text
    return repr(job) + logs


def _rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            status = Path("/proc", str(current), "status").read_text()
        except OSError:
            continue
        total += next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS")), 0)
    return total


def _own_rss_kib(pid: int) -> int:
    """Resident memory of the process alone."""
    status = Path("/proc", str(pid), "status").read_text()
    return next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS"))


def _part_pid(c, prefix: str) -> int:  # type: ignore[no-untyped-def]
    return int(next(p.proc.pid for p in c.parts if p.name.startswith(prefix) and p.proc))


def _attack(c, marker: str) -> str:  # type: ignore[no-untyped-def]
    pids = [_part_pid(c, n) for n in ("server", "compile", "wafer")]
    port = int(c.url.rsplit(":", 1)[1])
    data_dir = str(c.settings.data_dir.resolve())
    return attack_source(data_dir, pids, [port, 6379, 5432], marker, syscall_numbers())


def _checkpoints_digest(c, job_id: str) -> str:  # type: ignore[no-untyped-def]
    digest = hashlib.sha256()
    for path in sorted((c.settings.data_dir / "checkpoints" / job_id).rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def test_hostile_model_and_make_batch_are_contained(cluster, tenants) -> None:  # type: ignore[no-untyped-def]
    c, attacker, victim = cluster, tenants["attacker"], tenants["victim"]
    honest = {"model.py": MODEL, "data.py": NUMPY_DATA}
    victim_job = _wait(c, victim, _submit(c, victim, _spec("victim"), honest), _ended)
    assert victim_job["state"] == "succeeded", victim_job
    before = _checkpoints_digest(c, victim_job["id"])
    secret = c.settings.ensure_admin_token()

    marker = "sam-attack-" + uuid.uuid4().hex
    model = MODEL + "\n" + _attack(c, marker) + "\nraise RuntimeError(run_attacks())\n"
    on_compile = _submit(
        c, attacker, _spec("steal-compile"), {"model.py": model, "data.py": NUMPY_DATA}
    )
    wafer_data = ON_WAFER.format(body="    raise RuntimeError(run_attacks())") + _attack(c, marker)
    on_wafer = _submit(
        c, attacker, _spec("steal-wafer"), {"model.py": MODEL, "data.py": wafer_data}
    )
    for job_id in (on_compile, on_wafer):
        job = _wait(c, attacker, job_id, _ended)
        assert job["state"] == "failed" and job["error"]["kind"] == "model_error", job
        assert_contained(parse_report(job["error"]["message"]), pool_uid=ROOT)
        readable = _readable(c, attacker, job)
        assert (
            secret not in readable
            and str(c.settings.data_dir.resolve()) + "/sam.db" not in readable.split("REPORT")[0]
        )
    assert marker_processes(marker) == []  # the daemon, the forks: all gone with their jobs
    assert _checkpoints_digest(c, victim_job["id"]) == before
    assert all(p.proc and p.proc.poll() is None for p in c.parts)  # every worker survived


def test_forged_frames_cannot_hold_a_region_or_grow_the_wafer_worker(cluster, tenants) -> None:  # type: ignore[no-untyped-def]
    c, attacker = cluster, tenants["attacker"]
    silent = ON_WAFER.format(body=HEADER.format(shape="[16, 8]"))
    huge = ON_WAFER.format(body=HEADER.format(shape="[16, 16777216]"))
    wafer_rss = _rss_kib(_part_pid(c, "wafer"))

    timed = _spec(
        "silent-timeout", resources={"region": {"rows": 8, "cols": 8}, "time_limit": "20s"}
    )
    job_id = _submit(c, attacker, timed, {"model.py": MODEL, "data.py": silent})
    running = _wait(c, attacker, job_id, lambda j: j["state"] == "running" or _ended(j))
    started = time.monotonic()
    job = _wait(c, attacker, job_id, _ended, timeout=120)
    assert job["state"] == "failed" and job["error"]["kind"] == "timeout", job
    assert time.monotonic() - started < 20 + 15, running

    job_id = _submit(c, attacker, _spec("silent-cancel"), {"model.py": MODEL, "data.py": silent})
    _wait(c, attacker, job_id, lambda j: j["state"] == "running")
    time.sleep(3)
    asked = time.monotonic()
    httpx.post(f"{c.url}/api/v1/jobs/{job_id}/cancel", headers=attacker).raise_for_status()
    job = _wait(c, attacker, job_id, _ended, timeout=60)
    assert job["state"] == "cancelled" and time.monotonic() - asked < 10, job

    job_id = _submit(c, attacker, _spec("huge-frame"), {"model.py": MODEL, "data.py": huge})
    job = _wait(c, attacker, job_id, _ended)
    assert job["state"] == "failed" and "would take" in job["error"]["message"], job
    assert _rss_kib(_part_pid(c, "wafer")) - wafer_rss < 300 * 1024
    wafer = httpx.get(f"{c.url}/api/v1/cluster", headers=attacker).json()["wafers"][0]
    assert wafer["allocations"] == []


def test_an_enormous_builtin_fails_in_its_sandbox_not_in_the_compile_worker(
    cluster, tenants
) -> None:  # type: ignore[no-untyped-def]
    """The compile worker's own memory (its sandboxes are processes of their own, with their own
    limits, killed after each task) is measured after an honest compile: a worker's first
    compile imports its compile pipeline (100 MB to 785 MB here), whatever the model."""
    c, attacker = cluster, tenants["attacker"]
    small = {
        "name": "small-mlp",
        "model": {"builtin": "mlp", "kwargs": {"hidden": 16}},
        "data": {"batch_size": 8},
        "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "10m"},
    }
    compiled = lambda j: j["state"] not in ("queued", "compiling")  # noqa: E731
    _wait(c, attacker, _submit(c, attacker, small, {}), compiled)
    compile_rss = _own_rss_kib(_part_pid(c, "compile"))
    spec = {
        "name": "huge-mlp",
        "model": {"builtin": "mlp", "kwargs": {"hidden": 60000, "depth": 3}},
        "data": {"batch_size": 8},
        "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "10m"},
    }
    job = _wait(c, attacker, _submit(c, attacker, spec, {}), _ended)
    assert job["state"] == "failed" and job["error"]["kind"] == "model_error", job
    assert "memory" in job["error"]["message"], job
    assert _own_rss_kib(_part_pid(c, "compile")) - compile_rss < 200 * 1024


@pytest.mark.parametrize(
    "files",
    [
        {"data.py": TORCH_DATA},
        {"data.py": NUMPY_DATA},
        {"data.py": SIBLING_DATA, "helpers.py": SIBLING},
    ],
    ids=["torch_at_top", "numpy_only", "sibling_import"],
)
def test_honest_make_batch_files_train_end_to_end(cluster, tenants, files) -> None:  # type: ignore[no-untyped-def]
    c, victim = cluster, tenants["victim"]
    job_id = _submit(c, victim, _spec("honest"), {"model.py": MODEL, **files})
    job = _wait(c, victim, job_id, _ended)
    assert job["state"] == "succeeded", job
    assert job["progress"]["step"] == 6 and job["progress"]["loss"] is not None


def test_a_worker_without_its_sandbox_refuses_tenant_code_and_stays_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sam_server.config import Settings
    from sam_worker.supervisor import Cluster

    for key in [k for k in os.environ if k.startswith("SAM_")]:
        monkeypatch.delenv(key)
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text("wafers:\n  - {id: w0, arch: wse2, rows: 64, cols: 64}\n")
    monkeypatch.setenv("SAM_CLUSTER", str(cluster_file))
    monkeypatch.setenv("SAM_SANDBOX_BWRAP", "/nonexistent/bwrap")
    c = Cluster(Settings(data_dir=tmp_path / "data", admin_token=ADMIN), port=free_port())
    c.start()
    try:
        c.wait_ready(180)
        who = _tenant(c, "lab")
        for spec, files in (
            (_spec("user-model"), {"model.py": MODEL, "data.py": NUMPY_DATA}),
            ({"name": "builtin", "model": {"builtin": "mlp"}}, {}),
        ):
            job = _wait(c, who, _submit(c, who, spec, files), _ended)
            assert job["state"] == "failed" and job["error"]["kind"] == "internal", job
            assert "tenant code refused" in job["error"]["message"], job
            assert "bubblewrap not found at /nonexistent/bwrap" in job["error"]["message"], job
        assert all(p.proc and p.proc.poll() is None for p in c.parts)
        logs = (c.settings.data_dir / "logs" / "compile-0.log").read_text()
        assert "tenant code sandbox UNAVAILABLE" in logs
    finally:
        c.stop()
