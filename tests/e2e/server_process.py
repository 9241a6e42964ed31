"""`sam server` as a real process on a port of its own, for tests that need one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import ADMIN_TOKEN, free_port

SAM = str(Path(sys.executable).parent / "sam")


class ServerProcess:
    """Start, SIGTERM and restart `sam server` on one port, database and data dir."""

    def __init__(self, db_url: str, data_dir: Path, *, workers: int = 1, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
        self.env.update(
            SAM_DATABASE_URL=db_url,
            SAM_DATA_DIR=str(data_dir),
            SAM_ADMIN_TOKEN=ADMIN_TOKEN,
            SAM_LOG_LEVEL="WARNING",
            **env,
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 180.0) -> ServerProcess:
        """Start the server and wait until /healthz answers."""
        args = [SAM, "server", "--port", str(self.port), "--workers", str(self.workers)]
        self.proc = subprocess.Popen(
            args,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its worker processes die with it (kill)
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sam server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("sam server did not start")

    def terminate(self, timeout_s: float = 30.0) -> float:
        """SIGTERM; the seconds until the process exited."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)
        return time.monotonic() - began

    def kill(self) -> None:
        """Stop it whatever its state (test clean-up)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
