"""Accounting that outlives the queue: `GET /api/v1/acct` and `GET /api/v1/reports/usage`,
on SQLite and PostgreSQL, through the real app (each job ended by the lifecycle's own calls)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete

from sam_server.db.models import Job, JobAttempt
from sam_server.db.session import session_scope
from sam_server.db.types import utcnow
from sam_server.services import lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, spec, submit


def run_and_end(url: str, job_id: str, *, hours: float, outcome: str, error=None) -> None:  # type: ignore[no-untyped-def]
    """Compile, place on wse-0 as a 4x4 region `hours` ago, then end the run as a worker does."""
    with session_scope(url) as s:
        job = s.get(Job, job_id)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
        job.lease_owner, job.attempts = "w", 1
        s.add(
            JobAttempt(
                job_id=job_id,
                attempt=1,
                tenant_id=job.tenant_id,
                wafer_id="wse-0",
                row=2,
                col=3,
                rows=4,
                cols=4,
                started_at=utcnow() - timedelta(hours=hours),
            )
        )
    with session_scope(url) as s:
        assert lifecycle.finish_run(
            s, job_id=job_id, owner="w", attempt=1, outcome=outcome, error=error
        )


def _purge(url: str) -> None:
    """What a retention purge of job rows does (logs, metrics, attempts go with them)."""
    with session_scope(url) as s:
        s.execute(delete(JobAttempt))
        s.execute(delete(Job))


def test_acct_outlives_purged_jobs_and_each_tenant_sees_only_its_own(client, settings):
    url = settings.resolved_database_url
    make_tenant(client, "acme")
    make_tenant(client, "globex")
    alice = make_user(client, "acme", "alice")
    bob = make_user(client, "globex", "bob")
    ok = submit(client, alice, spec("train-ok")).json()["id"]
    bad = submit(client, bob, spec("train-bad")).json()["id"]
    waiting = submit(client, alice, spec("still-queued")).json()["id"]
    run_and_end(url, ok, hours=2, outcome="succeeded")
    run_and_end(url, bad, hours=1, outcome="failed", error=("numerical", "loss is nan"))
    with session_scope(url) as s:  # retention removes the ended jobs; the queued one stays
        s.execute(delete(JobAttempt).where(JobAttempt.job_id.in_([ok, bad])))
        s.execute(delete(Job).where(Job.id.in_([ok, bad])))
    assert client.get(f"/api/v1/jobs/{ok}", headers=alice).status_code == 404

    start = (utcnow() - timedelta(days=1)).isoformat()
    mine = client.get("/api/v1/acct", params={"start": start}, headers=alice)
    assert mine.status_code == 200, mine.text
    items = {r["job_id"]: r for r in mine.json()["items"]}
    assert set(items) == {ok, waiting}  # never globex's job
    done = items[ok]
    assert (done["state"], done["tenant"], done["user"], done["name"]) == (
        "succeeded",
        "acme",
        "alice",
        "train-ok",
    )
    assert done["region"] == {"wafer": "wse-0", "row": 2, "col": 3, "rows": 4, "cols": 4}
    assert done["attempts"] == 1 and done["exit_kind"] is None
    assert abs(done["pe_hours"] - 16 * 2) < 0.05  # 16 PEs for two hours
    began, ended = (datetime.fromisoformat(done[k]) for k in ("start_at", "end_at"))
    assert abs(done["elapsed_s"] - (ended - began).total_seconds()) < 0.01
    assert items[waiting]["state"] == "queued" and items[waiting]["end_at"] is None

    everyone = client.get("/api/v1/acct", params={"start": start}, headers=ADMIN).json()["items"]
    failed = {r["job_id"]: r for r in everyone}[bad]
    assert (failed["state"], failed["exit_kind"], failed["tenant"]) == (
        "failed",
        "numerical",
        "globex",
    )
    only_failed = client.get(
        "/api/v1/acct", params={"start": start, "state": "failed"}, headers=ADMIN
    ).json()["items"]
    assert [r["job_id"] for r in only_failed] == [bad]
    # A period that ended before these jobs were submitted holds none of them.
    before = client.get(
        "/api/v1/acct",
        params={"start": start, "end": (utcnow() - timedelta(hours=12)).isoformat()},
        headers=ADMIN,
    ).json()["items"]
    assert before == []
    swapped = client.get(
        "/api/v1/acct", params={"start": utcnow().isoformat(), "end": start}, headers=ADMIN
    )
    assert swapped.status_code == 400 and "after end" in swapped.json()["detail"]


def test_usage_report_clips_runs_to_the_period_per_tenant_and_user(client, settings):
    url = settings.resolved_database_url
    make_tenant(client, "acme")
    make_tenant(client, "globex")
    alice = make_user(client, "acme", "alice")
    carol = make_user(client, "acme", "carol")
    bob = make_user(client, "globex", "bob")
    for who, hours in ((alice, 2), (alice, 1), (carol, 1), (bob, 3)):
        run_and_end(url, submit(client, who).json()["id"], hours=hours, outcome="succeeded")
    _purge(url)
    day = {"start": (utcnow() - timedelta(days=1)).isoformat()}
    report = client.get("/api/v1/reports/usage", params=day, headers=ADMIN).json()
    tenants = {t["tenant"]: t for t in report["tenants"]}
    assert abs(tenants["acme"]["pe_hours"] - 16 * 4) < 0.1 and tenants["acme"]["jobs"] == 3
    assert abs(tenants["globex"]["pe_hours"] - 16 * 3) < 0.1
    users = {(u["tenant"], u["user"]): u["pe_hours"] for u in report["users"]}
    assert abs(users[("acme", "alice")] - 48) < 0.1 and abs(users[("acme", "carol")] - 16) < 0.1
    assert abs(sum(t["percent"] for t in report["tenants"]) - 100) < 0.1
    # The last 30 minutes: every run overlaps it by 30 minutes, 8 PE-hours each.
    recent = {"start": (utcnow() - timedelta(minutes=30)).isoformat()}
    clipped = client.get("/api/v1/reports/usage", params=recent, headers=ADMIN).json()
    assert abs(clipped["pe_hours"] - 4 * 8) < 0.2
    # A tenant's user sees only its tenant.
    own = client.get("/api/v1/reports/usage", params=day, headers=bob).json()
    assert [t["tenant"] for t in own["tenants"]] == ["globex"]
    assert [u["user"] for u in own["users"]] == ["bob"]
