"""The API's live streams the dashboard reads (any client may): a job's steps as SSE, the
changes a principal may see, and a job's state timeline. A real HTTP server on SQLite."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx

from sam_server.db.models import Job, JobMetric
from sam_server.db.session import session_scope
from sam_server.services.transitions import transition
from tests.api.helpers import alice_and_eve, alice_job, make_tenant, make_user, submit

SSE = {"Accept": "text/event-stream"}


def _events(lines: Iterator[str], until: str, limit_s: float = 20) -> list[tuple[str, str]]:
    """(event, data) pairs of an SSE response's lines up to and including the first `until`."""
    out: list[tuple[str, str]] = []
    event, deadline = "message", time.monotonic() + limit_s
    for line in lines:
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            out.append((event, line.split(":", 1)[1].strip()))
            if event == until:
                return out
        elif line.startswith("id:"):
            out.append(("id", line.split(":", 1)[1].strip()))
        assert time.monotonic() < deadline, out
    return out


def _run(url: str, job_id: str, steps: range, end: str | None, pause: float = 0.3) -> None:
    time.sleep(pause)
    with session_scope(url) as s:
        job = s.get(Job, job_id)
        for state in ("compiling", "pending", "running"):
            if job.state != "running":
                transition(s, job, state)
    for step in steps:
        time.sleep(0.1)
        with session_scope(url) as s:
            s.add(
                JobMetric(
                    job_id=job_id,
                    step=step,
                    loss=2.0 - step / 10,
                    sim_cycles=100,
                    samples_per_sec=1e6,
                    attempt=1,
                )
            )
            s.get(Job, job_id).progress_step = step + 1
    if end:
        with session_scope(url) as s:
            transition(s, s.get(Job, job_id), end)


def test_metrics_stream_sends_each_step_then_the_end_and_resumes(live_server, settings):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        alice, eve = alice_and_eve(client)
        job_id = submit(client, alice).json()["id"]
        worker = threading.Thread(target=_run, args=(url, job_id, range(3), "succeeded"))
        worker.start()
        with client.stream("GET", f"/api/v1/jobs/{job_id}/metrics", headers=alice | SSE) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.iter_lines()
            events = _events(lines, "end")
        worker.join()
        steps = [json.loads(d) for e, d in events if e == "step"]
        assert [s["step"] for s in steps] == [0, 1, 2]
        assert steps[2]["loss"] == 1.8 and steps[0]["samples_per_sec"] == 1e6
        assert [d for e, d in events if e == "id"] == ["0", "1", "2"]
        assert events[-1] == ("end", '{"state": "succeeded"}')
        # Resumed after step 1: only step 2, then the end.
        resume = alice | SSE | {"Last-Event-ID": "1"}
        with client.stream("GET", f"/api/v1/jobs/{job_id}/metrics", headers=resume) as r:
            lines = r.iter_lines()
            again = _events(lines, "end")
        assert [json.loads(d)["step"] for e, d in again if e == "step"] == [2]
        # Another tenant's job is a 404, as every read; a bad token a 401, before any stream.
        r = client.get(f"/api/v1/jobs/{job_id}/metrics", headers=eve | SSE)
        assert r.status_code == 404
        r = client.get(
            f"/api/v1/jobs/{job_id}/metrics", headers={"Authorization": "Bearer x"} | SSE
        )
        assert r.status_code == 401
        # The plain JSON answer is unchanged.
        plain = client.get(f"/api/v1/jobs/{job_id}/metrics", headers=alice).json()
        assert [s["step"] for s in plain["steps"]] == [0, 1, 2]


def test_events_stream_shows_only_the_callers_tenant(live_server, settings):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        alice, eve = alice_and_eve(client)
        theirs = submit(client, eve).json()["id"]
        mine = submit(client, alice).json()["id"]

        def both() -> None:
            _run(url, theirs, range(2), "failed", pause=0.5)
            _run(url, mine, range(2), "succeeded", pause=0.1)

        worker = threading.Thread(target=both)
        with client.stream("GET", "/api/v1/events", headers=alice | SSE) as r:
            worker.start()
            lines = r.iter_lines()
            seen: list[tuple[str, str]] = []
            while not any(e == "job" and '"to_state": "succeeded"' in d for e, d in seen):
                seen += _events(lines, "job")
        worker.join()
        text = json.dumps(seen)
        assert theirs not in text
        jobs = [json.loads(d) for e, d in seen if e == "job"]
        assert {j["id"] for j in jobs} == {mine}
        assert [j["event"]["to_state"] for j in jobs] == [
            "compiling",
            "pending",
            "running",
            "succeeded",
        ]
        assert seen[0][0] == "cluster"  # the wafer map comes first
        progress = [json.loads(d) for e, d in seen if e == "progress"]
        assert all(item["id"] == mine for p in progress for item in p["items"])
        # The admin sees both tenants' changes, resumable from an event id.
        admin_jobs = set()
        with client.stream(
            "GET",
            "/api/v1/events",
            headers={"Authorization": f"Bearer {settings.admin_token}"}
            | SSE
            | {"Last-Event-ID": "0"},
        ) as r:
            lines = r.iter_lines()
            while len(admin_jobs) < 2:
                admin_jobs |= {json.loads(d)["id"] for e, d in _events(lines, "job") if e == "job"}
        assert admin_jobs == {mine, theirs}
        assert client.get("/api/v1/events", headers=SSE).status_code == 401


def test_job_timeline_lists_every_transition(live_server, settings):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        alice, job_id = alice_job(client)
        _run(url, job_id, range(0), "succeeded", pause=0)
        body = client.get(f"/api/v1/jobs/{job_id}/events", headers=alice).json()
        states = [(e["from_state"], e["to_state"]) for e in body["items"]]
        assert states[-4:] == [
            ("queued", "compiling"),
            ("compiling", "pending"),
            ("pending", "running"),
            ("running", "succeeded"),
        ]
        assert all(e["at"].endswith("Z") for e in body["items"])


def test_queue_takes_limit_user_and_tenant(client, settings):
    make_tenant(client, "acme")
    make_tenant(client, "other")
    alice = make_user(client, "acme", "alice")
    bob = make_user(client, "acme", "bob")
    eve = make_user(client, "other", "eve")
    ids = [submit(client, who).json()["id"] for who in (alice, bob, alice, eve)]
    whole = client.get("/api/v1/queue", headers=alice).json()["items"]
    assert [j["id"] for j in whole] == ids[:3]  # no plan yet: submit order, own tenant only
    first = client.get("/api/v1/queue?limit=2", headers=alice).json()["items"]
    assert [j["id"] for j in first] == ids[:2]
    assert first[0]["reasons"] and "position" in first[0]
    mine = client.get("/api/v1/queue?user=alice", headers=alice).json()["items"]
    assert [j["id"] for j in mine] == [ids[0], ids[2]]
    admin = {"Authorization": f"Bearer {settings.admin_token}"}
    other = client.get("/api/v1/queue?tenant=other", headers=admin).json()["items"]
    assert [j["id"] for j in other] == [ids[3]]
    # A user's `tenant` cannot widen its view: it still sees only its own tenant's jobs.
    theirs = client.get("/api/v1/queue?tenant=acme", headers=eve).json()["items"]
    assert [j["id"] for j in theirs] == [ids[3]]
