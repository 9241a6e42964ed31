"""The hostile corpus against docker-compose.yml's own processes: PostgreSQL, Redis, real Celery
workers (server, scheduler, two compile and two wafer workers as separate processes, started
with the commands and environment compose declares; tests/integration/compose.py).

A hostile model.py and make_batch are submitted with `sam submit`, as a tenant would: every
attempt fails inside the attacker's own job, no secret reaches what the attacker can read, no
process of the attacker outlives its job, the victim's job and checkpoints are untouched, a
flood of output files fails only its own job, a wafer worker SIGKILLed under a sleeping
make_batch leaves no sandbox process, and the cluster still serves the victim afterwards.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from compiler.sandbox.seccomp import syscall_numbers
from tests.conftest import create_pg_database, drop_pg_database, free_port
from tests.integration.compose import ComposeProcesses, RedisServer
from tests.security.hostile import assert_contained, attack_source, parse_report
from tests.security.test_sandbox_cluster import MODEL, NUMPY_DATA, ON_WAFER
from tests.security.test_sandbox_unit import ROOT, marker_processes

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

SAM = str(Path(sys.executable).parent / "sam")
FLOOD_MODEL = MODEL + (
    "\nimport os\nfor _i in range(1_000_000):\n    open(f'/job/out/flood{_i}', 'w').close()\n"
)
SLEEPER = """    import os, time
    for _ in range(3):
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARKER])
    time.sleep(600)
"""


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("compose-hostile")
    db = create_pg_database()
    redis = RedisServer(free_port(), tmp / "redis")
    redis.start()
    procs = ComposeProcesses(db, redis.url, tmp / "data", free_port())
    try:
        try:
            procs.start()
        except RuntimeError:  # not ready within 120 s: a loaded machine starts them slowly
            procs.wait_ready(600)
        yield procs
    finally:
        procs.stop()
        redis.stop()
        drop_pg_database(db)


def _tenant(c: ComposeProcesses, name: str) -> str:
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": name}, headers=c.admin()).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{name}/users", json={"name": "u"}, headers=c.admin())
    r.raise_for_status()
    return str(r.json()["token"])


@pytest.fixture(scope="module")
def tokens(compose: ComposeProcesses) -> dict[str, str]:
    return {"attacker": _tenant(compose, "attacker"), "victim": _tenant(compose, "victim")}


def _submit(c: ComposeProcesses, token: str, folder: Path, name: str, **files: str) -> str:
    """`sam submit --parsable job.yaml` from a job folder, as a tenant does."""
    folder.mkdir(parents=True)
    for file_name, text in files.items():
        (folder / file_name).write_text(text)
    spec = {
        "name": name,
        "model": {"file": "model.py", "class": "Regressor"},
        "data": {"source": "file", "file": "data.py", "function": "make_batch", "batch_size": 16},
        "train": {"loss": "mse", "optimizer": {"name": "sgd", "lr": 0.05}},
        "run_options": {"steps_per_epoch": 6, "checkpoint_every": 3},
        "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "15m"},
    }
    (folder / "job.yaml").write_text(yaml.safe_dump(spec))
    env = dict(os.environ, SAM_URL=c.url, SAM_TOKEN=token)
    done = subprocess.run(
        [SAM, "submit", "--parsable", "job.yaml"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _job(c: ComposeProcesses, token: str, job_id: str) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {token}"}
    return dict(httpx.get(f"{c.url}/api/v1/jobs/{job_id}", headers=auth, timeout=30).json())


def _wait(c: ComposeProcesses, token: str, job_id: str, until, timeout: float = 900) -> dict:  # type: ignore[no-untyped-def,type-arg]
    deadline, job = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        c.revive()  # restart: unless-stopped
        job = _job(c, token, job_id)
        if until(job):
            return job
        time.sleep(0.5)
    raise AssertionError(f"timed out; last state {job}")


def _ended(job: dict[str, Any]) -> bool:
    return job["state"] in ("succeeded", "failed", "cancelled")


def _readable(c: ComposeProcesses, token: str, job: dict[str, Any]) -> str:
    """Everything the attacker can read back about its job: the job and its log."""
    auth = {"Authorization": f"Bearer {token}"}
    logs = httpx.get(f"{c.url}/api/v1/jobs/{job['id']}/logs", headers=auth, timeout=30).text
    return repr(job) + logs


def _checkpoints_digest(c: ComposeProcesses, job_id: str) -> str:
    digest = hashlib.sha256()
    for path in sorted((c.data_dir / "checkpoints" / job_id).rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _attack(c: ComposeProcesses, marker: str) -> str:
    pids = [c.procs[name].pid for name in ("server", "scheduler", "compile-1", "wafer-0")]
    redis_port = int(c.broker_url.rsplit(":", 1)[1].split("/")[0])
    ports = [c.port, redis_port, 6379, 5432]
    return attack_source(str(c.data_dir.resolve()), pids, ports, marker, syscall_numbers())


def _all_up(c: ComposeProcesses) -> bool:
    return all(p.poll() is None for p in c.procs.values())


def test_hostile_tenant_code_is_contained_on_the_compose_cluster(
    compose: ComposeProcesses, tokens: dict[str, str], tmp_path: Path
) -> None:
    c, attacker, victim = compose, tokens["attacker"], tokens["victim"]
    victim_id = _submit(
        c, victim, tmp_path / "victim", "victim", **{"model.py": MODEL, "data.py": NUMPY_DATA}
    )
    victim_job = _wait(c, victim, victim_id, _ended)
    assert victim_job["state"] == "succeeded", victim_job
    before = _checkpoints_digest(c, victim_id)
    assert before != hashlib.sha256().hexdigest()  # it did write checkpoints

    marker = "sam-compose-attack-" + uuid.uuid4().hex
    attack = _attack(c, marker)
    on_compile = _submit(
        c,
        attacker,
        tmp_path / "steal-compile",
        "steal-compile",
        **{
            "model.py": MODEL + "\n" + attack + "\nraise RuntimeError(run_attacks())\n",
            "data.py": NUMPY_DATA,
        },
    )
    wafer_data = ON_WAFER.format(body="    raise RuntimeError(run_attacks())") + attack
    on_wafer = _submit(
        c,
        attacker,
        tmp_path / "steal-wafer",
        "steal-wafer",
        **{"model.py": MODEL, "data.py": wafer_data},
    )
    flood = _submit(
        c, attacker, tmp_path / "flood", "flood", **{"model.py": FLOOD_MODEL, "data.py": NUMPY_DATA}
    )
    for job_id in (on_compile, on_wafer):
        job = _wait(c, attacker, job_id, _ended)
        assert job["state"] == "failed" and job["error"]["kind"] == "model_error", job
        assert_contained(parse_report(job["error"]["message"]), pool_uid=ROOT)
        readable = _readable(c, attacker, job)
        assert c.admin_token not in readable
        assert str(c.data_dir.resolve()) + "/sam.db" not in readable.split("REPORT")[0]
    job = _wait(c, attacker, flood, _ended)
    assert job["state"] == "failed" and job["error"]["kind"] == "model_error", job
    assert "more than 64 files in its output directory" in job["error"]["message"], job
    assert marker_processes(marker) == []  # the daemon, the forks: gone with their jobs
    assert _checkpoints_digest(c, victim_id) == before
    assert _all_up(c), {n: p.poll() for n, p in c.procs.items()}  # no worker died

    # The cluster still serves: the victim's next job trains end to end.
    again = _submit(
        c, victim, tmp_path / "again", "again", **{"model.py": MODEL, "data.py": NUMPY_DATA}
    )
    job = _wait(c, victim, again, _ended)
    assert job["state"] == "succeeded" and job["progress"]["step"] == 6, job


def _parent(pid: int) -> int:
    return int(Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[1])


def _sandbox_starter(pid: int) -> int:
    """The worker process that started the sandbox `pid` runs in: the parent of its outer bwrap
    (the topmost bwrap above `pid`), or above it when that is the worker's spawner helper
    (compiler/sandbox/spawner.py, which forks bwrap for the worker)."""
    outer, current = None, pid
    while current > 1:
        if Path("/proc", str(current), "cmdline").read_bytes().split(b"\0")[0].endswith(b"bwrap"):
            outer = current
        current = _parent(current)
    assert outer is not None, f"no bwrap above {pid}"
    starter = _parent(outer)
    if b"spawner.serve()" in Path("/proc", str(starter), "cmdline").read_bytes():
        starter = _parent(starter)
    return starter


def test_a_sigkilled_wafer_worker_leaves_no_sandbox_process(
    compose: ComposeProcesses, tokens: dict[str, str], tmp_path: Path
) -> None:
    c, attacker = compose, tokens["attacker"]
    marker = "sam-compose-orphan-" + uuid.uuid4().hex
    data = ON_WAFER.format(body=SLEEPER).replace(
        "import sys\n", f"import sys\nMARKER = {marker!r}\n", 1
    )
    job_id = _submit(
        c, attacker, tmp_path / "sleeper", "sleeper", **{"model.py": MODEL, "data.py": data}
    )
    deadline = time.monotonic() + 600
    while len(marker_processes(marker)) < 3 and time.monotonic() < deadline:
        assert not _ended(_job(c, attacker, job_id))
        time.sleep(0.5)
    sleepers = marker_processes(marker)
    assert len(sleepers) == 3, sleepers
    worker = _sandbox_starter(sleepers[0])
    assert "wafer" in Path("/proc", str(worker), "cmdline").read_text()
    os.kill(worker, signal.SIGKILL)  # that process alone, as the OOM killer would
    deadline = time.monotonic() + 10
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker_processes(marker) == []
    auth = {"Authorization": f"Bearer {attacker}"}
    httpx.post(f"{c.url}/api/v1/jobs/{job_id}/cancel", headers=auth, timeout=30).raise_for_status()
    c.revive()
    job = _wait(c, attacker, job_id, _ended, timeout=300)
    assert job["state"] == "cancelled", job
    assert marker_processes(marker) == []
    c.wait_ready()  # the restarted wafer worker is back online
