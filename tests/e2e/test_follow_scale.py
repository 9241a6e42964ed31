"""Log following through a real `sam server` process: many idle followers do not slow other
calls, and a follow survives a server restart without losing or repeating a line."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from client.sdk import SamClient
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from tests.api.helpers import ADMIN, alice_job, make_tenant, submit
from tests.e2e.server_process import SAM, ServerProcess

FOLLOWERS = 200


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _other_calls_p99(url: str, headers: dict[str, str], job_id: str, rounds: int = 60) -> float:
    paths = [f"/api/v1/jobs/{job_id}", "/healthz", "/api/v1/queue"]
    samples = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for _ in range(rounds):
            for path in paths:
                began = time.perf_counter()
                assert client.get(path).status_code == 200
                samples.append(time.perf_counter() - began)
    return _p99(samples)


class Followers:
    """N concurrent `Accept: text/event-stream` readers of one job, on one asyncio thread."""

    def __init__(self, url: str, headers: dict[str, str], job_id: str, n: int) -> None:
        self.url, self.headers, self.job_id, self.n = url, headers, job_id, n
        self.connected = 0
        self.keepalives = 0
        self.ends: list[str] = []
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _one(self, client: httpx.AsyncClient) -> None:
        headers = self.headers | {"Accept": "text/event-stream"}
        async with client.stream(
            "GET", f"/api/v1/jobs/{self.job_id}/logs", headers=headers
        ) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("retry:"):
                    self.connected += 1
                elif line.startswith(": keep-alive"):
                    self.keepalives += 1
                elif line.startswith("data:") and '"state"' in line:
                    self.ends.append(line)

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=self.n + 10)
        timeout = httpx.Timeout(30, read=None)
        async with httpx.AsyncClient(base_url=self.url, limits=limits, timeout=timeout) as client:
            await asyncio.gather(*(self._one(client) for _ in range(self.n)))

    def wait_connected(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.connected < self.n and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.connected == self.n, f"only {self.connected} of {self.n} followers connected"


@pytest.fixture
def sqlite_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'sam.db'}", tmp_path / "data", SAM_FOLLOW_HEARTBEAT_S="1"
    )
    yield server.start()
    server.kill()


def test_idle_followers_do_not_slow_other_calls(sqlite_server: ServerProcess):
    with httpx.Client(base_url=sqlite_server.url, timeout=30) as client:
        alice, job_id = alice_job(client)
    _other_calls_p99(sqlite_server.url, alice, job_id, rounds=10)  # warm up
    without = _other_calls_p99(sqlite_server.url, alice, job_id)

    followers = Followers(sqlite_server.url, alice, job_id, FOLLOWERS)
    followers.thread.start()
    followers.wait_connected()
    scrape = httpx.get(sqlite_server.url + "/metrics").text
    assert f"sam_log_followers {FOLLOWERS}.0" in scrape
    with_followers = _other_calls_p99(sqlite_server.url, alice, job_id)
    # The old follow route held a pool thread per follower: 45 of them made /healthz take 11 s.
    assert with_followers < 3 * without + 0.05, (without, with_followers)

    time.sleep(1.5)  # heartbeats every second keep quiet streams open
    assert followers.keepalives >= FOLLOWERS
    httpx.post(f"{sqlite_server.url}/api/v1/jobs/{job_id}/cancel", headers=alice, timeout=30)
    followers.thread.join(30)
    assert not followers.thread.is_alive()
    assert len(followers.ends) == FOLLOWERS and all("cancelled" in e for e in followers.ends)


def _write_lines(db_url: str, job_id: str, first: int, last: int) -> None:
    with session_scope(db_url) as session:
        for i in range(first, last):
            lifecycle.log(session, job_id, f"line {i}")


def test_a_follow_survives_a_server_restart(db_url: str, tmp_path: Path):
    server = ServerProcess(db_url, tmp_path / "data").start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            make_tenant(client, "acme")
            token = client.post(
                "/api/v1/tenants/acme/users", json={"name": "alice"}, headers=ADMIN
            ).json()["token"]
            alice = {"Authorization": f"Bearer {token}"}
            job_id = submit(client, alice).json()["id"]
        _write_lines(db_url, job_id, 0, 5)
        env = server.env | {"SAM_URL": server.url, "SAM_TOKEN": token}
        follower = subprocess.Popen(
            [SAM, "logs", "-f", job_id], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        waited: dict[str, Any] = {}
        waiter = threading.Thread(
            target=lambda: waited.update(
                SamClient(server.url, token).wait_for_job(job_id, poll_interval_s=0.2)
            )
        )
        waiter.start()
        time.sleep(2)  # the follower has read lines 0-4
        assert server.terminate() < 5, "SIGTERM must not wait for open log streams"
        _write_lines(db_url, job_id, 5, 10)  # written while no server runs
        time.sleep(1)
        server.start()
        _write_lines(db_url, job_id, 10, 15)
        time.sleep(1)
        httpx.post(f"{server.url}/api/v1/jobs/{job_id}/cancel", headers=alice, timeout=30)
        out, err = follower.communicate(timeout=60)
        waiter.join(60)
    finally:
        server.kill()
    assert follower.returncode == 0, err.decode()
    printed = [line.split("INFO ", 1)[1].strip() for line in out.decode().splitlines()]
    # every line once, in order, then the cancellation's own line
    assert printed == [f"line {i}" for i in range(15)] + ["cancelled by alice"]
    assert b"ended: cancelled" in err
    assert waited.get("state") == "cancelled"
