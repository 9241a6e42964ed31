"""Retention of ended jobs' history (SQLite and PostgreSQL): logs and step metrics of jobs ended
longer ago than the configured age are deleted; the job row stays for accounting, and a user is
told the history was purged rather than shown an empty log."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from sam_server.controller.loop import purge_history
from sam_server.db.models import Job, JobLog, JobMetric, JobMetricChunk
from sam_server.db.session import session_scope
from sam_server.db.types import utcnow
from sam_server.services import lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import submit
from tests.api.test_history import _record, _running_job


def _end(url: str, job_id: str, days_ago: float) -> None:
    with session_scope(url) as s:
        job = s.get(Job, job_id)
        transition(s, job, "succeeded")
        job.finished_at = utcnow() - timedelta(days=days_ago)


def _rows(url: str, job_id: str) -> int:
    with session_scope(url) as s:
        return sum(
            s.execute(select(func.count()).where(m.job_id == job_id)).scalar_one()
            for m in (JobLog, JobMetric, JobMetricChunk)
        )


def test_old_ended_jobs_lose_logs_and_metrics_but_keep_their_row(client, settings):
    url = settings.resolved_database_url
    old, alice = _running_job(client, settings)
    _record(url, old, range(300))  # 300 steps: packed chunks and recent rows
    with session_scope(url) as s:
        for i in range(5):
            lifecycle.log(s, old, f"line {i}")
    before = client.get(f"/api/v1/jobs/{old}/metrics", headers=alice).json()
    _end(url, old, days_ago=40)
    recent = submit(client, alice).json()["id"]  # a job that ended yesterday keeps its history
    with session_scope(url) as s:
        job = s.get(Job, recent)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
        lifecycle.log(s, recent, "still here")
    _end(url, recent, days_ago=1)

    assert purge_history(settings.updated(history_retention_days=0)) == 0
    assert purge_history(settings.updated(history_retention_days=30)) == 1
    assert purge_history(settings.updated(history_retention_days=30)) == 0

    assert _rows(url, old) == 0
    logs = client.get(f"/api/v1/jobs/{old}/logs", headers=alice)
    assert logs.headers["X-SAM-History-Purged"] == "true"
    assert "deleted on" in logs.text and "retention policy" in logs.text
    metrics = client.get(f"/api/v1/jobs/{old}/metrics", headers=alice).json()
    assert metrics["steps"] == [] and metrics["purged_at"]
    assert metrics["purged"]["steps"] == 300
    assert metrics["total_sim_cycles"] == before["total_sim_cycles"]
    view = client.get(f"/api/v1/jobs/{old}", headers=alice).json()
    assert view["state"] == "succeeded" and view["history_purged_at"]
    assert view["attempts"] == 1  # accounting facts stay on the row

    kept = client.get(f"/api/v1/jobs/{recent}/logs", headers=alice)
    assert "still here" in kept.text and "X-SAM-History-Purged" not in kept.headers
    assert client.get(f"/api/v1/jobs/{recent}", headers=alice).json()["history_purged_at"] is None
