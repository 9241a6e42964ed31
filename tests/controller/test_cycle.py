"""The live scheduler cycle over the real database (SQLite and PostgreSQL): decisions are written
with their outbox messages, leases are claimed with compare-and-set, lost work is requeued."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from sam_domain.compile import CompiledArtifact
from sam_server.controller.loop import dispatch_outbox, run_cycle
from sam_server.controller.snapshot import forget_active_jobs
from sam_server.db.models import CompileServer, Job, JobAttempt, OutboxMessage
from sam_server.db.session import session_scope
from sam_server.db.types import as_utc, utcnow
from sam_server.services import lifecycle
from tests.api.helpers import ADMIN, alice_job, make_tenant, make_user, spec, submit


@pytest.fixture
def cluster_settings(settings, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "cluster.yaml"
    path.write_text("wafers:\n  - {id: w0, arch: wse2, rows: 16, cols: 16}\ncompile_servers: 1\n")
    return settings.model_copy(update={"cluster": path})


@pytest.fixture
def api(cluster_settings):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    with TestClient(create_app(cluster_settings)) as client:
        yield client


def _online(settings) -> None:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        lifecycle.heartbeat_wafer(s, wafer_id="w0", worker="test", arch="wse2", rows=16, cols=16)


def _job(settings, job_id: str) -> Job:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        job = s.get(Job, job_id)
        s.expunge(job)
        return job


def _compile_ok(settings, job_id: str) -> None:  # type: ignore[no-untyped-def]
    url = settings.resolved_database_url
    with session_scope(url) as s:
        assert lifecycle.claim_compile(s, job_id=job_id, owner="c1", lease_s=30) is not None
    with session_scope(url) as s:
        result = CompiledArtifact("k", False, 0.1, {})
        assert lifecycle.finish_compile(s, job_id=job_id, owner="c1", result=result) == "pending"


def _compiled_job(api, settings) -> str:  # type: ignore[no-untyped-def]
    """A job of alice (tenant acme), compiled, with the wafer online: placed by the next cycle."""
    _, job_id = alice_job(api)
    _online(settings)
    run_cycle(settings)
    _compile_ok(settings, job_id)
    return job_id


def _expire_lease(settings, job_id: str) -> None:  # type: ignore[no-untyped-def]
    """The job's worker lease ran out (its worker died)."""
    with session_scope(settings.resolved_database_url) as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )


def test_cycle_sends_queued_jobs_to_compile_then_places_them(api, cluster_settings):
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    job_id = submit(api, alice, spec(resources={"region": {"rows": 8, "cols": 8}})).json()["id"]
    _online(cluster_settings)
    stats = run_cycle(cluster_settings)
    assert stats.compiles == 1 and _job(cluster_settings, job_id).state == "compiling"
    sent: list[tuple[str, str, dict]] = []
    assert dispatch_outbox(cluster_settings, lambda t, q, p: sent.append((t, q, p))) == 1
    assert sent == [("sam.compile", "compile", {"job_id": job_id})]
    _compile_ok(cluster_settings, job_id)
    stats = run_cycle(cluster_settings)
    job = _job(cluster_settings, job_id)
    assert stats.starts == 1 and job.state == "running" and job.attempts == 1
    assert (job.wafer_id, job.region_rows, job.region_cols) == ("w0", 8, 8)
    dispatch_outbox(cluster_settings, lambda t, q, p: sent.append((t, q, p)))
    assert sent[-1] == ("sam.run", "wafer.w0", {"job_id": job_id, "attempt": 1})


def test_outbox_keeps_messages_when_the_broker_is_down(api, cluster_settings):
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    submit(api, alice)
    run_cycle(cluster_settings)

    def broken(*_):  # type: ignore[no-untyped-def]
        raise ConnectionError("broker down")

    assert dispatch_outbox(cluster_settings, broken) == 0
    sent: list[str] = []
    assert dispatch_outbox(cluster_settings, lambda t, q, p: sent.append(t)) == 1
    assert sent == ["sam.compile"]
    with session_scope(cluster_settings.resolved_database_url) as s:
        assert all(m.sent_at is not None for m in s.execute(select(OutboxMessage)).scalars())


def test_waiting_jobs_get_reasons_positions_and_no_overlap(api, cluster_settings):
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    ids = [
        submit(api, alice, spec(f"j{i}", resources={"region": {"rows": 12, "cols": 12}})).json()[
            "id"
        ]
        for i in range(2)
    ]
    _online(cluster_settings)
    for _ in range(4):  # one tenant holds one of the two compile slots at a time
        run_cycle(cluster_settings)
        for job_id in ids:
            if _job(cluster_settings, job_id).state == "compiling":
                _compile_ok(cluster_settings, job_id)
    states = sorted(_job(cluster_settings, j).state for j in ids)
    assert states == ["pending", "running"]  # two 12x12 regions cannot share a 16x16 wafer
    waiting = next(j for j in ids if _job(cluster_settings, j).state == "pending")
    info = api.get(f"/api/v1/jobs/{waiting}/explain", headers=alice).json()
    assert info["position"] == 1
    assert {r["code"] for r in info["reasons"]} & {"Resources", "Fragmented", "ReservedFor"}
    queue = api.get("/api/v1/queue", headers=alice).json()["items"]
    assert [q["id"] for q in queue] == [waiting]


def test_claim_is_compare_and_set_and_lost_lease_requeues(api, cluster_settings):
    job_id = _compiled_job(api, cluster_settings)
    run_cycle(cluster_settings)
    url = cluster_settings.resolved_database_url
    with session_scope(url) as s:
        assert lifecycle.claim_run(
            s, job_id=job_id, attempt=1, wafer_id="w0", owner="a", lease_s=30
        )
    with session_scope(url) as s:  # a duplicate delivery, or another worker, gets nothing
        assert (
            lifecycle.claim_run(s, job_id=job_id, attempt=1, wafer_id="w0", owner="b", lease_s=30)
            is None
        )
    _expire_lease(cluster_settings, job_id)  # the worker died: its lease runs out
    stats = run_cycle(cluster_settings)
    assert job_id in stats.reaped
    job = _job(cluster_settings, job_id)
    assert job.lost_attempts == 1
    assert job.state == "running" and job.attempts == 2  # requeued and placed again at once
    with session_scope(url) as s:
        rows = list(s.execute(select(JobAttempt).where(JobAttempt.job_id == job_id)).scalars())
        assert [r.outcome for r in rows] == ["lost", None]
        # the old owner can no longer renew or finish
        assert lifecycle.renew_lease(s, job_id=job_id, owner="a", lease_s=30) is None


def test_repeatedly_lost_job_fails_with_worker_lost(api, cluster_settings):
    job_id = _compiled_job(api, cluster_settings)
    for _ in range(cluster_settings.scheduler.max_attempts):
        run_cycle(cluster_settings)
        _expire_lease(cluster_settings, job_id)
    run_cycle(cluster_settings)
    job = _job(cluster_settings, job_id)
    assert job.state == "failed" and job.error_kind == "worker_lost"
    assert "lost" in (job.error_message or "")


def test_compile_only_job_succeeds_without_a_region(api, cluster_settings):
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    job_id = submit(api, alice, spec(mode="compile_only")).json()["id"]
    run_cycle(cluster_settings)
    url = cluster_settings.resolved_database_url
    with session_scope(url) as s:
        lifecycle.claim_compile(s, job_id=job_id, owner="c", lease_s=30)
    with session_scope(url) as s:
        result = CompiledArtifact("k", True, 0.01, {})
        assert lifecycle.finish_compile(s, job_id=job_id, owner="c", result=result) == "succeeded"
    job = api.get(f"/api/v1/jobs/{job_id}", headers=alice).json()
    assert job["state"] == "succeeded" and job["region"] is None
    assert job["compile"] == {"cache_hit": True, "artifact": "k", "seconds": 0.01}


def test_identical_job_reuses_the_artifact_and_is_placed_in_one_cycle(api, cluster_settings):
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    first = submit(api, alice, spec("first")).json()["id"]
    _online(cluster_settings)
    run_cycle(cluster_settings)
    _compile_ok(cluster_settings, first)
    again = submit(api, alice, spec("again", priority="high")).json()["id"]
    other = submit(api, alice, spec("other", resources={"region": {"rows": 2, "cols": 2}})).json()[
        "id"
    ]
    stats = run_cycle(cluster_settings)
    assert stats.reused == 1
    job = api.get(f"/api/v1/jobs/{again}", headers=alice).json()
    assert job["state"] == "running"  # no trip through a compile server
    assert job["compile"] == {"cache_hit": True, "artifact": "k", "seconds": 0.0}
    assert _job(cluster_settings, other).state == "compiling"  # another shape: a real compile


def test_a_wafer_whose_worker_is_gone_takes_no_new_jobs(api, cluster_settings):
    alice, job_id = alice_job(api)
    url = cluster_settings.resolved_database_url
    _online(cluster_settings)
    run_cycle(cluster_settings)
    _compile_ok(cluster_settings, job_id)
    from sam_server.db.models import Wafer

    with session_scope(url) as s:  # the worker stopped heartbeating a minute ago
        s.execute(update(Wafer).values(heartbeat_at=utcnow() - timedelta(seconds=60)))
    run_cycle(cluster_settings)
    assert _job(cluster_settings, job_id).state == "pending"
    info = api.get(f"/api/v1/jobs/{job_id}/explain", headers=alice).json()
    assert "WaferUnavailable" in {r["code"] for r in info["reasons"]}
    assert api.get("/api/v1/cluster", headers=alice).json()["wafers"][0]["state"] == "offline"
    _online(cluster_settings)
    run_cycle(cluster_settings)
    assert _job(cluster_settings, job_id).state == "running"


def test_dead_compile_servers_go_offline_then_expire(api, cluster_settings):
    """A compile server that stops beating is shown offline (busy 0) after three missed beats
    and removed by the scheduler after `compile_server_expire_s`, as a live one is not."""
    url = cluster_settings.resolved_database_url
    now = utcnow()
    with session_scope(url) as s:
        lifecycle.heartbeat_compile_server(s, server_id="alive", busy=1, compiles=3, cache_hits=1)
        lifecycle.heartbeat_compile_server(s, server_id="silent", busy=2, compiles=5, cache_hits=0)
        lifecycle.heartbeat_compile_server(
            s, server_id="long-dead", busy=1, compiles=9, cache_hits=0
        )
        s.execute(
            update(CompileServer)
            .where(CompileServer.id == "silent")
            .values(heartbeat_at=now - timedelta(seconds=60))
        )
        s.execute(
            update(CompileServer)
            .where(CompileServer.id == "long-dead")
            .values(heartbeat_at=now - timedelta(hours=2))
        )
    listed = {
        s["id"]: s for s in api.get("/api/v1/cluster", headers=ADMIN).json()["compile_servers"]
    }
    assert listed["alive"]["state"] == "online" and listed["alive"]["busy"] == 1
    assert listed["silent"]["state"] == "offline" and listed["silent"]["busy"] == 0
    assert listed["long-dead"]["state"] == "offline"
    run_cycle(cluster_settings)
    listed = {s["id"] for s in api.get("/api/v1/cluster", headers=ADMIN).json()["compile_servers"]}
    assert listed == {"alive", "silent"}


def test_a_migration_goes_through_the_preemption_path_and_the_blocked_job_starts(
    api, cluster_settings
):
    """Job A (8x8) sits in the middle of the top half, B (8x16) fills the bottom half, both for
    another hour; J (8x8) has waited an hour and fits nowhere. The cycle asks A to checkpoint
    (a move, logged as such); once A's worker reports it preempted, the next cycle starts J in
    the space A left and A again from its checkpoint (a new attempt), with no overlap."""
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")

    def region(rows: int, cols: int, limit: str) -> dict:  # type: ignore[type-arg]
        return spec(resources={"region": {"rows": rows, "cols": cols}, "time_limit": limit})

    _online(cluster_settings)
    a, b = (submit(api, alice, region(8, c, "2h")).json()["id"] for c in (8, 16))
    for job_id in (a, b):  # one compile slot for the tenant: one after the other
        run_cycle(cluster_settings)
        _compile_ok(cluster_settings, job_id)
    run_cycle(cluster_settings)
    assert _job(cluster_settings, a).state == _job(cluster_settings, b).state == "running"
    url = cluster_settings.resolved_database_url
    hour_ago = utcnow() - timedelta(hours=1)
    with session_scope(url) as s:  # the fragmented layout, as if they started an hour ago
        for job_id, row, col in ((a, 0, 4), (b, 8, 0)):
            s.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(region_row=row, region_col=col, started_at=hour_ago)
            )
        assert lifecycle.claim_run(s, job_id=a, attempt=1, wafer_id="w0", owner="w", lease_s=60)
    blocked = submit(api, alice, region(8, 8, "10m")).json()["id"]
    run_cycle(cluster_settings)  # A's program in A's shape: it reuses A's artifact
    assert _job(cluster_settings, blocked).state == "pending"
    with session_scope(url) as s:
        s.execute(update(Job).where(Job.id == blocked).values(eligible_at=hour_ago))
    stats = run_cycle(cluster_settings)
    assert stats.preemptions == 1 and stats.starts == 0
    assert _job(cluster_settings, a).preempt_requested
    logs = api.get(f"/api/v1/jobs/{a}/logs", headers=alice).text
    assert f"preempted for job {blocked}: migrated to w0" in logs
    with session_scope(url) as s:  # A's worker checkpoints and gives the region back
        assert lifecycle.read_flags(s, job_id=a, owner="w")["preempt"]
        lifecycle.finish_run(s, job_id=a, owner="w", attempt=1, outcome="preempted")
    run_cycle(cluster_settings)
    moved, started = _job(cluster_settings, a), _job(cluster_settings, blocked)
    assert started.state == "running" and moved.state == "running"
    assert moved.attempts == 2 and moved.preempt_count == 1
    rects = [
        (j.region_row, j.region_col, j.region_rows, j.region_cols)
        for j in (moved, started, _job(cluster_settings, b))
    ]
    for i, r in enumerate(rects):
        for other in rects[i + 1 :]:
            assert not (
                r[0] < other[0] + other[2]
                and other[0] < r[0] + r[2]
                and r[1] < other[1] + other[3]
                and other[1] < r[1] + r[3]
            ), rects


def test_a_cycle_charges_the_pes_a_running_job_held_to_its_tenant_and_user(api, cluster_settings):
    """Fair share (`services/dispatch.charge_usage`): a job holding an 8x8 region for the last
    100 s adds about 6,400 PE-seconds to its tenant and its user; a job still waiting adds none."""
    from sam_server.db.models import Tenant, User

    make_tenant(api, "acme")
    make_tenant(api, "idle")
    alice = make_user(api, "acme", "alice")
    bob = make_user(api, "idle", "bob")
    _online(cluster_settings)
    region = spec(resources={"region": {"rows": 8, "cols": 8}, "time_limit": "1h"})
    job_id = submit(api, alice, region).json()["id"]
    run_cycle(cluster_settings)
    _compile_ok(cluster_settings, job_id)
    run_cycle(cluster_settings)
    assert _job(cluster_settings, job_id).state == "running"
    waiting = submit(api, bob, region).json()["id"]  # sent to compile, holds no region
    url = cluster_settings.resolved_database_url
    with session_scope(url) as s:
        s.execute(update(Tenant).values(usage_pe_s=0.0, usage_at=utcnow() - timedelta(seconds=100)))
        s.execute(update(User).values(usage_pe_s=0.0))
    run_cycle(cluster_settings)
    with session_scope(url) as s:
        tenants = {t.name: t.usage_pe_s for t in s.execute(select(Tenant)).scalars()}
        users = {u.name: u.usage_pe_s for u in s.execute(select(User)).scalars()}
    assert 6000 < tenants["acme"] <= 6400 + 64 * 5  # decay and the cycle's own seconds
    assert 6000 < users["alice"] <= 6400 + 64 * 5
    assert _job(cluster_settings, waiting).state == "compiling"
    assert tenants["idle"] == 0.0 and users["bob"] == 0.0


@pytest.mark.parametrize(
    ("priority", "suspend_factor", "stops"),
    [("normal", 10.0, True), ("high", 0.0, True), ("normal", 0.0, False)],
    ids=["suspension", "class-preemption", "suspension-off"],
)
def test_selective_suspension_stops_a_long_job_of_the_same_class_in_the_live_cycle(
    api, cluster_settings, priority, suspend_factor, stops
):
    """L (16x16, the whole wafer, 10h limit) started an hour ago right after its submit; S
    (16x16, 10m limit) has waited two hours: its bounded slowdown so far is (7200 + 600) / 600
    = 13, L's 1. With the preempt plugin's suspend_factor 10 the cycle stops L for S although both are of the
    normal class, through the path a higher class takes: L's worker is asked to checkpoint, L
    goes back to pending, and the next cycle starts S. With the factor 0 a normal-class S
    waits; a high-class S preempts L either way."""
    settings = cluster_settings.updated(
        scheduler_plugin_args={"preempt": {"suspend_factor": suspend_factor}}
    )
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")

    def whole_wafer(limit: str, **extra: str) -> dict:  # type: ignore[type-arg]
        return spec(resources={"region": {"rows": 16, "cols": 16}, "time_limit": limit}, **extra)

    _online(settings)
    long_job = submit(api, alice, whole_wafer("10h")).json()["id"]
    run_cycle(settings)
    _compile_ok(settings, long_job)
    run_cycle(settings)
    assert _job(settings, long_job).state == "running"
    url = settings.resolved_database_url
    hour_ago, two_hours_ago = utcnow() - timedelta(hours=1), utcnow() - timedelta(hours=2)
    with session_scope(url) as s:  # L was submitted and started an hour ago; its worker runs it
        s.execute(
            update(Job)
            .where(Job.id == long_job)
            .values(created_at=hour_ago, eligible_at=hour_ago, started_at=hour_ago)
        )
        assert lifecycle.claim_run(
            s, job_id=long_job, attempt=1, wafer_id="w0", owner="w", lease_s=60
        )
    short_job = submit(api, alice, whole_wafer("10m", priority=priority)).json()["id"]
    run_cycle(settings)  # L's program in L's shape: S reuses L's artifact
    assert _job(settings, short_job).state == "pending"
    with session_scope(url) as s:  # S has waited two hours
        s.execute(
            update(Job)
            .where(Job.id == short_job)
            .values(created_at=two_hours_ago, eligible_at=two_hours_ago)
        )
    stats = run_cycle(settings)
    assert stats.starts == 0
    if not stops:
        assert stats.preemptions == 0 and not _job(settings, long_job).preempt_requested
        assert _job(settings, short_job).state == "pending"
        run_cycle(settings)
        assert _job(settings, long_job).state == "running"
        return
    assert stats.preemptions == 1 and _job(settings, long_job).preempt_requested
    logs = api.get(f"/api/v1/jobs/{long_job}/logs", headers=alice).text
    assert f"preempted for job {short_job}" in logs and "checkpointing" in logs
    with session_scope(url) as s:  # L's worker checkpoints and gives the region back
        assert lifecycle.read_flags(s, job_id=long_job, owner="w")["preempt"]
        lifecycle.finish_run(s, job_id=long_job, owner="w", attempt=1, outcome="preempted")
    stopped = _job(settings, long_job)
    assert stopped.state == "pending" and stopped.reason == "Preempted"
    assert stopped.preempt_count == 1 and stopped.last_preempted_at is not None
    assert stopped.wafer_id is None and not stopped.preempt_requested
    assert stopped.preempted_for == short_job  # S, named, goes first for the region it freed
    stats = run_cycle(settings)
    started = _job(settings, short_job)
    assert stats.starts == 1 and started.state == "running" and started.wafer_id == "w0"
    stats = run_cycle(settings)  # L, back in the queue, does not stop S in turn
    assert stats.preemptions == 0 and _job(settings, long_job).state == "pending"
    assert not _job(settings, short_job).preempt_requested


def test_a_resumed_job_runs_the_minimum_time_from_its_restart_before_it_is_stopped_again(
    api, cluster_settings
):
    """L (the whole wafer) started an hour ago, is preempted for a high-class job H1 and, once
    H1 ends, resumes from its checkpoint (attempt 2; its `started_at` stays its first start).
    A second high-class job H2 does not stop it at once: the preemption protections
    (SAM_PREEMPT_MIN_RUN_S, 60 s) and the policy's time left count from the restart, as the
    worker gives each attempt the job's whole time limit. Two minutes after the restart, H2
    preempts it."""
    settings = cluster_settings.updated(scheduler_plugin_args={"preempt": {"suspend_factor": 0.0}})
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    url = settings.resolved_database_url

    def whole_wafer(limit: str, **extra: str) -> dict:  # type: ignore[type-arg]
        return spec(resources={"region": {"rows": 16, "cols": 16}, "time_limit": limit}, **extra)

    def run_as_worker(job_id: str, attempt: int, outcome: str | None = None) -> None:
        with session_scope(url) as s:
            assert lifecycle.claim_run(
                s, job_id=job_id, attempt=attempt, wafer_id="w0", owner="w", lease_s=60
            )
            if outcome:
                lifecycle.finish_run(s, job_id=job_id, owner="w", attempt=attempt, outcome=outcome)

    _online(settings)
    long_job = submit(api, alice, whole_wafer("10h")).json()["id"]
    run_cycle(settings)
    _compile_ok(settings, long_job)
    run_cycle(settings)
    hour_ago = utcnow() - timedelta(hours=1)
    with session_scope(url) as s:
        s.execute(
            update(Job)
            .where(Job.id == long_job)
            .values(created_at=hour_ago, eligible_at=hour_ago, started_at=hour_ago)
        )
    run_as_worker(long_job, 1)
    first = submit(api, alice, whole_wafer("10m", priority="high")).json()["id"]
    run_cycle(settings)
    run_cycle(settings)
    assert _job(settings, long_job).preempt_requested
    with session_scope(url) as s:
        lifecycle.finish_run(s, job_id=long_job, owner="w", attempt=1, outcome="preempted")
    run_cycle(settings)
    assert _job(settings, first).state == "running"
    run_as_worker(first, 1, "succeeded")
    run_cycle(settings)
    resumed = _job(settings, long_job)
    assert resumed.state == "running" and resumed.attempts == 2
    first_start = as_utc(resumed.started_at)
    assert first_start is not None and first_start < utcnow() - timedelta(minutes=59)
    run_as_worker(long_job, 2)
    second = submit(api, alice, whole_wafer("10m", priority="high")).json()["id"]
    for _ in range(2):
        stats = run_cycle(settings)
        assert stats.preemptions == 0 and not _job(settings, long_job).preempt_requested
    assert _job(settings, second).state == "pending"
    with session_scope(url) as s:  # the restart was two minutes ago
        s.execute(
            update(JobAttempt)
            .where(JobAttempt.job_id == long_job, JobAttempt.attempt == 2)
            .values(placed_at=utcnow() - timedelta(minutes=2))
        )
    forget_active_jobs()  # (a placed attempt never changes: the cycle's cached rows keep it)
    stats = run_cycle(settings)
    assert stats.preemptions == 1 and _job(settings, long_job).preempt_requested
