"""Job history at scale: metrics packed into chunks yet every step served, server-side
`last`/`tail`/`since`, a compact database, and `Last-Event-ID` resume of a log stream."""

from __future__ import annotations

import json
import math
import os
from datetime import timedelta

import httpx

from sam_server.db.models import JobMetric, JobMetricChunk
from sam_server.db.session import session_scope
from sam_server.db.types import utcnow
from sam_server.services import history, lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import alice_job


def _running_job(client, settings) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    alice, job_id = alice_job(client)
    with session_scope(settings.resolved_database_url) as s:
        from sam_server.db.models import Job

        job = s.get(Job, job_id)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
        job.lease_owner, job.attempts = "w", 1
    return job_id, alice


def _step(i: int) -> dict[str, float | int]:
    loss = float("nan") if i == 7 else 2.0 / (1 + i) + math.sin(i) * 1e-3
    return {"step": i, "loss": loss, "sim_cycles": 1000 + i % 3, "samples_per_sec": 512.5}


def _record(url: str, job_id: str, steps: range, *, recent: int = 50, chunk: int = 100) -> None:
    batch = [_step(i) for i in steps]
    for at in range(0, len(batch), 25):  # as a wafer worker flushes: a few steps at a time
        with session_scope(url) as s:
            ok = lifecycle.record_steps(
                s,
                job_id=job_id,
                owner="w",
                attempt=1,
                steps=batch[at : at + 25],
                lines=[],
                keep_recent=recent,
                chunk_steps=chunk,
            )
            assert ok


def test_packed_metrics_still_serve_every_step(client, settings):
    url = settings.resolved_database_url
    job_id, alice = _running_job(client, settings)
    _record(url, job_id, range(1000))
    with session_scope(url) as s:
        rows = s.query(JobMetric).filter_by(job_id=job_id).count()
        chunks = s.query(JobMetricChunk).filter_by(job_id=job_id).count()
    assert rows <= 150 and chunks >= 8  # the table does not grow a row per step

    data = client.get(f"/api/v1/jobs/{job_id}/metrics", headers=alice).json()
    assert [s["step"] for s in data["steps"]] == list(range(1000))
    assert data["steps"][3] == {
        "step": 3,
        "loss": _step(3)["loss"],
        "sim_cycles": 1000,
        "samples_per_sec": 512.5,
    }
    assert data["steps"][7]["loss"] is None and data["steps"][7]["loss_nonfinite"] == "nan"
    assert data["total_sim_cycles"] == sum(1000 + i % 3 for i in range(1000))

    last = client.get(f"/api/v1/jobs/{job_id}/metrics?last=3", headers=alice)
    assert [s["step"] for s in last.json()["steps"]] == [997, 998, 999]
    assert len(last.content) < 10_000
    deep = client.get(f"/api/v1/jobs/{job_id}/metrics?last=400", headers=alice).json()
    assert [s["step"] for s in deep["steps"]] == list(range(600, 1000))
    assert client.get(f"/api/v1/jobs/{job_id}/metrics?last=0", headers=alice).status_code == 422


def test_a_resumed_attempt_rewrites_packed_steps(client, settings):
    url = settings.resolved_database_url
    job_id, alice = _running_job(client, settings)
    _record(url, job_id, range(600))
    with session_scope(url) as s:  # resume from a checkpoint of step 120: inside a chunk
        history.drop_metrics_from(s, job_id=job_id, first=120)
    _record(url, job_id, range(120, 300))
    steps = client.get(f"/api/v1/jobs/{job_id}/metrics", headers=alice).json()["steps"]
    assert [s["step"] for s in steps] == list(range(300))


def test_sqlite_stays_under_50_kb_per_thousand_steps(tmp_path, settings, client):
    if not settings.resolved_database_url.startswith("sqlite"):
        return  # file size is a SQLite measure; PostgreSQL runs the other tests
    url = settings.resolved_database_url
    job_id, _ = _running_job(client, settings)
    path = settings.resolved_database_url.removeprefix("sqlite:///")
    with session_scope(url) as s:
        s.connection().exec_driver_sql("VACUUM")
    before = os.path.getsize(path)
    _record(url, job_id, range(5000), recent=200, chunk=500)
    with session_scope(url) as s:
        s.connection().exec_driver_sql("VACUUM")
    per_1k = (os.path.getsize(path) - before) / 5
    assert per_1k < 50_000, per_1k


def test_log_tail_and_since(client, settings):
    url = settings.resolved_database_url
    job_id, alice = _running_job(client, settings)
    with session_scope(url) as s:
        for i in range(10):
            lifecycle.log(s, job_id, f"old {i}")
    cut = utcnow()
    with session_scope(url) as s:
        for i in range(3):
            lifecycle.log(s, job_id, f"new {i}")
    logs = f"/api/v1/jobs/{job_id}/logs"
    tail = client.get(logs, params={"tail": 2}, headers=alice)
    assert [line.split("INFO ")[1].strip() for line in tail.text.splitlines()] == ["new 1", "new 2"]
    since = client.get(logs, params={"since": cut.isoformat()}, headers=alice).text
    assert "old" not in since and since.count("new") == 3
    later = (cut + timedelta(hours=1)).isoformat()
    assert client.get(logs, params={"since": later}, headers=alice).text == ""
    bad = client.get(logs, params={"tail": 0}, headers=alice)
    assert bad.status_code == 422


def test_an_event_stream_resumes_after_last_event_id(live_server, settings):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        job_id, alice = _running_job(client, settings)
        with session_scope(url) as s:
            for i in range(5):
                lifecycle.log(s, job_id, f"line {i}")
        with session_scope(url) as s:
            from sam_server.db.models import Job

            transition(s, s.get(Job, job_id), "succeeded")
        stream = {"Accept": "text/event-stream"}
        first = _events(client, job_id, alice | stream)
        ids = [e["id"] for e in first if e.get("event") == "log"]
        assert len(ids) == 5 and all(ids)  # every event carries an id
        resumed = _events(client, job_id, alice | stream | {"Last-Event-ID": ids[1]})
        lines = [e["data"] for e in resumed if e.get("event") == "log"]
        assert [line.split("INFO ")[1].strip() for line in lines] == ["line 2", "line 3", "line 4"]
        assert json.loads(resumed[-1]["data"]) == {"state": "succeeded"}
        r = client.get(
            f"/api/v1/jobs/{job_id}/logs", headers=alice | stream | {"Last-Event-ID": "x"}
        )
        assert r.status_code == 400 and "Last-Event-ID" in r.json()["detail"]


def _events(client: httpx.Client, job_id: str, headers: dict[str, str]) -> list[dict[str, str]]:
    events, current = [], {}
    with client.stream("GET", f"/api/v1/jobs/{job_id}/logs", headers=headers) as response:
        for line in response.iter_lines():
            if not line:
                if current:
                    events.append(current)
                current = {}
            elif not line.startswith((":", "retry:")):
                key, _, value = line.partition(": ")
                current[key] = value
    return events
