"""A real `sam up` (separate processes, SQLite, the embedded broker) with two tenants, and a
Chromium driven by Playwright, for the dashboard's browser tests, its screenshots and its
benchmark. Nothing is downloaded: Playwright drives the system's Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

SAM = str(Path(sys.executable).parent / "sam")
REPO = Path(__file__).resolve().parents[2]

# A small cluster: two 64x64 wafers keep the map readable and the workers light.
CLUSTER_YAML = """\
wafers:
  - {id: wse-0, arch: wse2, rows: 64, cols: 64}
  - {id: wse-1, arch: wse2, rows: 64, cols: 64}
compile_servers: 1
"""


def chromium_path() -> str | None:
    """The system Chromium (Debian's `chromium` package; SAM_CHROMIUM overrides)."""
    for candidate in (os.environ.get("SAM_CHROMIUM"), "/usr/bin/chromium", "chromium"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def mlp_spec(name: str, *, steps: int, rows: int = 8, cols: int = 8, lr: float = 0.05) -> dict:
    """A built-in MLP job of `steps` training steps: small, quick to compile."""
    return {
        "name": name,
        "model": {"builtin": "mlp", "kwargs": {"hidden": 64}},
        "data": {
            "source": "synthetic",
            "task": "classification",
            "input_shape": [64],
            "num_classes": 10,
            "batch_size": 16,
        },
        "train": {"loss": "cross_entropy", "optimizer": {"name": "sgd", "lr": lr}, "seed": 0},
        "run_options": {"steps_per_epoch": steps, "checkpoint_every": 10_000},
        "resources": {"region": {"rows": rows, "cols": cols}, "time_limit": "30m"},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveCluster:
    """`sam up` in `workdir` on a free port; `tenants` maps tenant name -> a user's token."""

    def __init__(self, workdir: Path, *, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
        self.env.update(HOME=str(workdir), SAM_CLUSTER=str(workdir / "cluster.yaml"))
        self.env.update(env or {})
        self.proc: subprocess.Popen[str] | None = None
        self.admin_token = ""
        self.tokens: dict[str, str] = {}

    def start(self, timeout_s: float = 240.0) -> LiveCluster:
        """Start `sam up` and wait until its server answers and the wafers are online."""
        (self.workdir / "cluster.yaml").write_text(CLUSTER_YAML)
        self.proc = subprocess.Popen(
            [SAM, "up", "--port", str(self.port)],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "sam-up.log", "w"),  # noqa: SIM115 - kept for its life
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        token_file = self.workdir / "sam-data" / "admin.token"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sam up exited: {self.log_tail()}")
            if token_file.exists() and self._wafers_online():
                return self
            time.sleep(0.5)
        raise RuntimeError(f"sam up did not come up in {timeout_s} s: {self.log_tail()}")

    def _wafers_online(self) -> bool:
        try:
            self.admin_token = (self.workdir / "sam-data" / "admin.token").read_text().strip()
            view = self.get("/api/v1/cluster", self.admin_token)
        except (httpx.HTTPError, OSError):
            return False
        return bool(view["wafers"]) and all(w["state"] == "online" for w in view["wafers"])

    def log_tail(self) -> str:
        path = self.workdir / "sam-up.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM the whole process group and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    # -- the API, as any client calls it

    def request(self, method: str, path: str, token: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)

    def get(self, path: str, token: str) -> Any:
        response = self.request("GET", path, token)
        response.raise_for_status()
        return response.json()

    def add_tenant(self, tenant: str, user: str) -> str:
        """Create a tenant and a user in it; the user's token."""
        body = {"name": tenant, "quota": {"share": 1}}
        self.request("POST", "/api/v1/tenants", self.admin_token, json=body).raise_for_status()
        made = self.request(
            "POST", f"/api/v1/tenants/{tenant}/users", self.admin_token, json={"name": user}
        )
        made.raise_for_status()
        self.tokens[tenant] = made.json()["token"]
        return self.tokens[tenant]

    def submit(self, token: str, spec: dict) -> str:
        response = self.request("POST", "/api/v1/jobs", token, json={"spec": spec, "files": {}})
        response.raise_for_status()
        return str(response.json()["id"])

    def wait_for(self, token: str, job_id: str, predicate: Any, timeout_s: float = 300) -> dict:
        """Poll the job until `predicate(job)`; the job."""
        deadline = time.monotonic() + timeout_s
        job: dict = {}
        while time.monotonic() < deadline:
            job = self.get(f"/api/v1/jobs/{job_id}", token)
            if predicate(job):
                return job
            time.sleep(0.25)
        raise AssertionError(f"job {job_id} never got there: {job} {self.log_tail()}")


def launch_browser(playwright: Any) -> Any:
    """Headless Chromium from the system (never a downloaded build)."""
    path = chromium_path()
    if path is None:
        raise RuntimeError("no chromium: `apt-get install -y chromium` (or set SAM_CHROMIUM)")
    return playwright.chromium.launch(
        executable_path=path, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
    )


def sign_in(page: Any, url: str, token: str) -> None:
    """Open the dashboard and sign in with `token` as a user does."""
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")
