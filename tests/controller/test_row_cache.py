"""The planning cycle keeps the active jobs' rows between cycles and, on PostgreSQL, reads only
the rows written since the last cycle. A write must never be missed: not one committed after
the cycle that ran while it was in flight, not a job that ended, not a TRUNCATE."""

from __future__ import annotations

from sqlalchemy import text, update

from sam_server.controller.snapshot import load_active_jobs
from sam_server.db.models import Job
from sam_server.db.session import engine_for, session_scope
from tests.api.helpers import alice_job, make_tenant, make_user, spec, submit
from tests.controller.test_cycle import api, cluster_settings  # noqa: F401


def _rows(url: str) -> dict[str, tuple[str, str]]:
    with session_scope(url) as s:
        return {j.id: (j.state, j.priority) for j in load_active_jobs(s)}


def test_a_write_committed_after_a_cycle_is_seen_by_the_next(api, cluster_settings):  # noqa: F811
    url = cluster_settings.resolved_database_url
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    first, second = (submit(api, alice, spec(f"j{k}")).json()["id"] for k in range(2))
    assert _rows(url)[first] == ("queued", "normal")
    with engine_for(url).connect() as conn:  # a transaction in flight across a cycle's read
        conn.execute(update(Job).where(Job.id == first).values(priority="high"))
        if not url.startswith("sqlite"):  # (SQLite: one writer at a time, none in flight)
            later = submit(api, alice, spec("later")).json()["id"]  # commits meanwhile
            rows = _rows(url)
            assert rows[first] == ("queued", "normal") and later in rows  # not committed yet
        conn.commit()
    assert _rows(url)[first] == ("queued", "high")
    assert _rows(url)[first] == ("queued", "high")  # and it stays
    api.post(f"/api/v1/jobs/{second}/cancel", headers=alice)
    third = submit(api, alice, spec("j3")).json()["id"]
    rows = _rows(url)
    assert second not in rows and third in rows and rows[first] == ("queued", "high")


def test_a_truncated_table_forgets_every_row(api, cluster_settings):  # noqa: F811
    url = cluster_settings.resolved_database_url
    alice, job_id = alice_job(api)
    assert job_id in _rows(url)
    with engine_for(url).begin() as conn:
        statement = "DELETE FROM jobs" if url.startswith("sqlite") else "TRUNCATE jobs CASCADE"
        conn.execute(text(statement))
    assert _rows(url) == {}
