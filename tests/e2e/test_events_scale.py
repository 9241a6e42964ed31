"""200 open dashboards through a real `sam server` process: their `/api/v1/events` streams
share one database poll per tick, so `GET /jobs` stays about as fast as with none open (each
stream used to poll on its own: 200 of them made it 40x slower), and a change reaches them all."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from tests.api.helpers import make_tenant, make_user, submit
from tests.e2e.event_streams import EventStreams, list_latencies, p50
from tests.e2e.server_process import ServerProcess

STREAMS = 200


def _metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def test_many_event_streams_do_not_slow_the_job_list(tmp_path: Path):
    server = ServerProcess(f"sqlite:///{tmp_path / 'sam.db'}", tmp_path / "data").start()
    streams = None
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            make_tenant(client, "acme")
            alice = make_user(client, "acme", "alice")
            jobs = [submit(client, alice).json()["id"] for _ in range(20)]
        list_latencies(server.url, alice, 5)  # warm up
        without = p50(list_latencies(server.url, alice, 30))

        streams = EventStreams(server.url, alice, STREAMS).start()
        assert _metric(server.url, "sam_event_followers") == STREAMS
        with_streams = p50(list_latencies(server.url, alice, 30))
        print(
            f"GET /jobs p50: {without * 1000:.1f} ms, with {STREAMS} streams {with_streams * 1000:.1f} ms"
        )
        # Before the hub: 110 ms -> 4.5 s at 200 streams. Generous: load from other tests.
        assert with_streams < 3 * without + 0.05, (without, with_streams)

        polls = _metric(server.url, "sam_event_polls_total")
        time.sleep(3)
        polled = _metric(server.url, "sam_event_polls_total") - polls
        assert polled <= 3 / 0.5 + 2, f"{polled} polls in 3 s for {STREAMS} streams"

        seen = streams.events.get("job", 0)
        r = httpx.post(f"{server.url}/api/v1/jobs/{jobs[0]}/cancel", headers=alice, timeout=30)
        assert r.status_code in (200, 202), r.text
        deadline = time.monotonic() + 30
        while streams.events.get("job", 0) < seen + STREAMS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert streams.events.get("job", 0) - seen == STREAMS  # every stream, exactly once

        # SIGTERM: every stream is told `shutdown` (its page reconnects) and the server exits
        # without waiting for them.
        assert server.terminate() < 5, "SIGTERM must not wait for open event streams"
        deadline = time.monotonic() + 10
        while streams.ended < STREAMS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert streams.events.get("shutdown", 0) == STREAMS
    finally:
        if streams is not None:
            streams.stop()
        server.kill()
