"""`sam up`: the whole cluster as separate processes on one machine, restarted if one dies."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sam_server.config import Settings

log = logging.getLogger("sam.up")

_SAM = [sys.executable, "-c", "import sys; from client.cli import main; main(sys.argv[1:])"]


def _die_with_parent() -> None:
    """In the child: get SIGTERM when `sam up` dies, so no part outlives the supervisor."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class PortInUse(RuntimeError):
    """The address `sam up` would serve on is taken by another process; stop that process or
    pass another `--port` (or SAM_PORT)."""


def ensure_port_free(host: str, port: int) -> None:
    """Raise PortInUse if nothing can listen on host:port now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server itself binds (uvicorn sets SO_REUSEADDR): connections a stopped SAM left
        # in TIME_WAIT do not hold the port, a process listening on it does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortInUse(
                f"cannot serve on {host}:{port}: {exc.strerror or exc}. Another process "
                f"(another `sam up`?) holds it; stop it or choose another port with --port"
            ) from None


@dataclass
class Part:
    """One process of the cluster and its restart bookkeeping."""

    name: str
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    log_path: Path | None = None


@dataclass
class Cluster:
    """The parts of a local cluster; `start`, `watch` (restart the dead), `stop`."""

    settings: Settings
    host: str = "127.0.0.1"
    port: int = 8000
    parts: list[Part] = field(default_factory=list)

    def __post_init__(self) -> None:
        cluster = self.settings.load_cluster()
        self.parts = [
            Part("server", ["server", "--host", self.host, "--port", str(self.port)]),
            Part("scheduler", ["scheduler"]),
        ]
        self.parts += [
            Part(f"compile-{i}", ["worker", "compile", *self._metrics_port("compile", i)])
            for i in range(cluster.compile_servers)
        ]
        self.parts += [
            Part(
                f"wafer-{w.id}",
                ["worker", "wafer", "--wafer", w.id, *self._metrics_port("wafer", i)],
            )
            for i, w in enumerate(cluster.wafers)
        ]

    def _metrics_port(self, kind: str, index: int) -> list[str]:
        """`--metrics-port` of the index-th worker of `kind`: the configured base port + index."""
        base = getattr(self.settings.metrics, f"{kind}_metrics_port")
        return ["--metrics-port", str(base + index)] if base else []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SAM_DATA_DIR"] = str(self.settings.data_dir.resolve())
        env["SAM_ADMIN_TOKEN"] = self.settings.ensure_admin_token()
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def _spawn(self, part: Part) -> None:
        logs = (self.settings.data_dir / "logs").resolve()
        logs.mkdir(parents=True, exist_ok=True)
        part.log_path = logs / f"{part.name}.log"
        out = open(part.log_path, "ab")  # noqa: SIM115 - the child owns it
        part.proc = subprocess.Popen(
            [*_SAM, *part.args],
            env=self.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        out.close()

    def start(self) -> None:
        """Check the port is free, prepare the database, then start every part (the server
        first). Raises PortInUse before starting anything when another process holds the port:
        restarting a server that cannot bind would loop, and clients would reach the other one."""
        from sam_server.services.bootstrap import prepare_database

        ensure_port_free(self.host, self.port)
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        prepare_database(self.settings)
        for part in self.parts:
            self._spawn(part)

    def watch(self) -> list[str]:
        """Restart every part that died (with a back-off); returns the names restarted."""
        restarted = []
        now = time.monotonic()
        for part in self.parts:
            if part.proc is not None and part.proc.poll() is None:
                continue
            if part.proc is not None:
                code = part.proc.returncode
                part.proc = None
                part.restarts += 1
                part.next_start = now + min(10.0, 0.5 * 2 ** min(part.restarts, 5))
                log.warning(
                    "%s exited with %s; restarting (log: %s)", part.name, code, part.log_path
                )
            if now >= part.next_start:
                self._spawn(part)
                restarted.append(part.name)
        return restarted

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every part, then SIGKILL what is left after `timeout`."""
        for part in self.parts:
            if part.proc is not None and part.proc.poll() is None:
                os.killpg(part.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for part in self.parts:
            if part.proc is None:
                continue
            try:
                part.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(part.proc.pid, signal.SIGKILL)
                part.proc.wait()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the server answers /readyz and every wafer worker heartbeats."""
        import httpx

        deadline = time.monotonic() + timeout
        token = self.settings.ensure_admin_token()
        expected = len(self.settings.load_cluster().wafers)
        while time.monotonic() < deadline:
            self.watch()
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
                cluster = httpx.get(
                    f"{self.url}/api/v1/cluster",
                    timeout=2,
                    headers={"Authorization": f"Bearer {token}"},
                ).json()
                online = sum(1 for w in cluster["wafers"] if w["state"] == "online")
                if ready and online >= expected:
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.3)
        raise RuntimeError(
            f"the cluster did not become ready in {timeout:.0f}s; see {self.settings.data_dir}/logs"
        )
