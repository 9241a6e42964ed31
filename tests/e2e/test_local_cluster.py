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
    assert (tmp_path / "sam-data" / "sam.db").exists()  # SQLite under ./sam-data by default
    leftovers = subprocess.run(["pgrep", "-f", f"--port {port}"], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


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
