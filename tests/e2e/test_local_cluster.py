"""The README's run command as a new user runs it (`sam demo`), and `sam up`'s restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow

SAM = str(Path(sys.executable).parent / "sam")
REPO = Path(__file__).resolve().parents[2]


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """No SAM configuration at all: the embedded defaults (SQLite, no Redis)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env["HOME"] = str(tmp_path)
    return env


def test_sam_demo_runs_on_embedded_defaults(tmp_path: Path):
    port = free_port()
    proc = subprocess.run(
        [SAM, "demo", "--port", str(port)],
        cwd=tmp_path,
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "demo succeeded" in out
    assert "ran at the same time on wafer" in out
    assert out.count(" succeeded  steps") == 5
    # What a newcomer reads: the cluster, the jobs, their results; no migration log, no maps.
    assert "alembic" not in out and "+----" not in out
    assert len(out.splitlines()) <= 80, out
    assert (tmp_path / "sam-data" / "sam.db").exists()  # SQLite under ./sam-data by default
    leftovers = subprocess.run(["pgrep", "-f", f"--port {port}"], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""
    _readme_flow_after_demo(tmp_path, port)


def _readme_flow_after_demo(tmp_path: Path, port: int) -> None:
    """The README's next commands, in the folder where `make demo` ran: they must not collide
    with what the demo left behind (its tenants are named demo-*)."""
    env = _clean_env(tmp_path)
    up = subprocess.Popen(
        [SAM, "up", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for_line(up, "SAM is up at", 120)
        env["SAM_URL"] = f"http://127.0.0.1:{port}"
        env["SAM_TOKEN"] = (tmp_path / "sam-data" / "admin.token").read_text().strip()

        def sam(*args: str) -> str:
            done = subprocess.run(
                [SAM, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"sam {' '.join(args)}: {done.stdout}{done.stderr}"
            return done.stdout

        sam("admin", "tenant", "create", "physics", "--max-pes", "200000", "--share", "2")
        env["SAM_TOKEN"] = sam("admin", "user", "create", "physics", "alice").strip()
        submitted = sam("submit", str(REPO / "examples" / "mlp" / "job.yaml"), "--wait")
        job_id = submitted.split()[2]  # "Submitted job ID to tenant physics"
        assert "mlp-synthetic" in sam("queue", "--all")
        assert "LOSS" in sam("metrics", job_id)
        sam("fetch", job_id, "--checkpoint", "10")  # the README's example saves one every 10 steps
        assert (tmp_path / job_id / "checkpoints" / "step-00000010.npz").is_file()
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGTERM)
        up.wait(60)


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"no {needle!r} from sam up: {''.join(seen)[-2000:]}")


def test_sam_up_and_demo_refuse_a_busy_port(tmp_path: Path):
    """Another process holds the port: `sam up` and `sam demo` stop at once with a clear error
    instead of restarting a server that cannot bind (and talking to the other cluster)."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        for command in ("up", "demo"):
            started = time.monotonic()
            proc = subprocess.run(
                [SAM, command, "--port", str(port)],
                cwd=tmp_path,
                env=_clean_env(tmp_path),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert f"cannot serve on 127.0.0.1:{port}" in proc.stderr
            assert "--port" in proc.stderr
            assert time.monotonic() - started < 30
            assert "demo succeeded" not in proc.stdout + proc.stderr


def test_sam_up_restarts_a_part_that_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from sam_server.config import Settings
    from sam_worker.supervisor import Cluster

    for key in [k for k in os.environ if k.startswith("SAM_")]:
        monkeypatch.delenv(key)
    cluster = Cluster(Settings(data_dir=tmp_path / "data"), port=free_port())
    cluster.start()
    try:
        cluster.wait_ready(120)
        scheduler = next(p for p in cluster.parts if p.name == "scheduler")
        old_pid = scheduler.proc.pid
        os.killpg(old_pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not cluster.watch():
            time.sleep(0.2)
        deadline = time.monotonic() + 30
        while (
            scheduler.proc is None or scheduler.proc.pid == old_pid
        ) and time.monotonic() < deadline:
            cluster.watch()
            time.sleep(0.2)
        assert scheduler.proc is not None and scheduler.proc.pid != old_pid
        assert scheduler.proc.poll() is None and scheduler.restarts == 1
    finally:
        cluster.stop()
