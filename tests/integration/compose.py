"""Run docker-compose.yml's SAM services as plain processes against a real PostgreSQL and Redis.

There is no Docker engine on CI machines, so the file is checked by starting exactly the commands
and environment it declares, with only the addresses rewritten to this machine's services.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[2]
SAM_BIN = str(Path(sys.executable).parent / "sam")


def compose_services() -> dict[str, dict]:  # type: ignore[type-arg]
    """The services of docker-compose.yml (YAML merge keys resolved)."""
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def local_command(command: list[str], port: int) -> list[str]:
    """The compose command with the server bound to loopback on `port`."""
    out = list(command)
    out[0] = SAM_BIN
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


class RedisServer:
    """A private redis-server on its own port, so a test may stop and restart it."""

    def __init__(self, port: int, data_dir: Path) -> None:
        self.port, self.data_dir = port, data_dir
        self.proc: subprocess.Popen | None = None  # type: ignore[type-arg]
        data_dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--dir",
                str(self.data_dir),
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_connect_timeout=0.5).ping():
                    return
            except redis.RedisError:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@dataclass
class ComposeProcesses:
    """docker-compose.yml's SAM services as processes; restart policy applied by `revive()`."""

    database_url: str
    broker_url: str
    data_dir: Path
    port: int
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)  # type: ignore[type-arg]
    admin_token: str = ""

    def env(self, service: dict) -> dict[str, str]:  # type: ignore[type-arg]
        env = dict(os.environ)
        env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
        # The secrets compose requires from the operator's environment (`${VAR:?...}`): strong
        # ones, since the services run with SAM_ENV=production and refuse weak ones.
        self.admin_token = env["SAM_ADMIN_TOKEN"] = "sam_admin_integration_7f3a9c2e5b81d046"
        env["SAM_METRICS_TOKEN"] = "sam_scrape_integration_4d8e1b6a0c937f25"
        unresolved = [k for k, v in env.items() if k.startswith("SAM_") and "${" in v]
        assert not unresolved, f"docker-compose.yml asks for {unresolved}: give them a value here"
        env.update(
            SAM_DATABASE_URL=self.database_url,
            SAM_BROKER_URL=self.broker_url,
            SAM_DATA_DIR=str(self.data_dir),
            SAM_CLUSTER=str(ROOT / "deploy" / "cluster.yaml"),
            PYTHONUNBUFFERED="1",
        )
        # The compose file gives each container a metrics port; on one host the two compile
        # servers (and the two wafer workers) would both try to bind it.
        env.update({k: "0" for k in env if k.endswith("_METRICS_PORT")})
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, service: dict) -> subprocess.Popen:  # type: ignore[type-arg]
        log = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            local_command(service["command"], self.port),
            env=self.env(service),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return proc

    def start(self) -> None:
        """Migrate (the one-shot service), then start every long-running SAM service."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        services = compose_services()
        migrate = self._spawn("migrate", services["migrate"])
        assert migrate.wait(120) == 0, (self.data_dir / "migrate.log").read_text()
        for name, service in services.items():
            command = service.get("command") or []
            if name != "migrate" and command[:1] == ["sam"]:
                self.procs[name] = self._spawn(name, service)
        self.wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.revive()
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
                wafers = httpx.get(
                    f"{self.url}/api/v1/cluster", headers=self.admin(), timeout=2
                ).json()["wafers"]
                if ready and wafers and all(w["state"] == "online" for w in wafers):
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.3)
        logs = {p.name: p.read_text()[-2000:] for p in self.data_dir.glob("*.log")}
        raise RuntimeError(f"the compose services did not become ready: {logs}")

    def kill(self, name: str) -> None:
        """SIGKILL a service's whole process group (a crash, not a shutdown)."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def revive(self) -> list[str]:
        """`restart: unless-stopped`: start again every service that died."""
        services = compose_services()
        revived = []
        for name, proc in list(self.procs.items()):
            if proc.poll() is not None:
                self.procs[name] = self._spawn(name, services[name])
                revived.append(name)
        return revived

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
