"""`/metrics` under `sam server --workers 2`: counters summed over both processes, so
successive scrapes never go backwards whichever process answers."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.api.helpers import make_tenant, make_user, submit
from tests.e2e.server_process import ServerProcess


def _scrape(url: str) -> str:
    with httpx.Client(timeout=30) as fresh:  # a new connection: either process may answer
        response = fresh.get(url + "/metrics")
    assert response.status_code == 200
    return response.text


def _value(text: str, pattern: str) -> float:
    match = re.search(pattern + r" ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_counters_are_monotonic_across_two_server_processes(tmp_path: Path):
    server = ServerProcess(f"sqlite:///{tmp_path / 'sam.db'}", tmp_path / "data", workers=2)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            make_tenant(client, "acme")
            alice = make_user(client, "acme", "alice")
        seen = []
        for _ in range(8):
            with httpx.Client(base_url=server.url, timeout=30) as client:
                assert submit(client, alice).status_code == 201
            for _ in range(3):
                seen.append(_value(_scrape(server.url), "sam_submits_total"))
        text = _scrape(server.url)
    finally:
        server.kill()
    assert seen == sorted(seen), seen  # never backwards
    assert seen[-1] == 8.0  # every process's submits, not one process's
    route = (
        r'sam_api_request_duration_seconds_count\{method="POST",route="/api/v1/jobs",status="201"\}'
    )
    assert _value(text, route) == 8.0
    assert 'sam_jobs{state="queued"} 8.0' in text
