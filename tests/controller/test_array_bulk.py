"""An array's bulk verbs at 100,000-task scale, tested at a smaller N with small chunks (so every
verb crosses many chunk boundaries): submit, cancel, hold, release, requeue and the scheduler's
artifact reuse, on SQLite and PostgreSQL, through the real app and the real scheduler cycle."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select, update

from sam_domain.compile import CompiledArtifact
from sam_server.controller.loop import run_cycle
from sam_server.db.models import Job, JobAccounting, JobEvent, JobLog
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from tests.api.helpers import ADMIN, make_tenant, make_user, spec, submit

N = 1_250  # tasks; chunks of 200: seven chunks, the last one short
CHUNK = 200


@pytest.fixture
def bulk_settings(settings, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "cluster.yaml"
    path.write_text("wafers:\n  - {id: w0, arch: wse2, rows: 32, cols: 32}\ncompile_servers: 1\n")
    return settings.updated(cluster=path, bulk_chunk_rows=CHUNK, bulk_pause_s=0.0)


@pytest.fixture
def api(bulk_settings) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    with TestClient(create_app(bulk_settings)) as client:
        yield client


def _array(api: Any, who: dict[str, str], indices: str = f"0-{N - 1}") -> str:
    r = submit(api, who, spec("sweep", array=indices))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _states(settings: Any, array_id: str) -> Counter[str]:
    with session_scope(settings.resolved_database_url) as s:
        rows = s.execute(select(Job.state).where(Job.array_job_id == array_id)).scalars()
        return Counter(rows)


def _compile_first(settings: Any, array_id: str) -> None:
    """The compile server compiles task 0; the next cycles give its artifact to the others."""
    url = settings.resolved_database_url
    with session_scope(url) as s:
        lifecycle.heartbeat_wafer(s, wafer_id="w0", worker="t", arch="wse2", rows=32, cols=32)
    run_cycle(settings)
    first = f"{array_id}_0"
    with session_scope(url) as s:
        assert lifecycle.claim_compile(s, job_id=first, owner="c", lease_s=30)
    with session_scope(url) as s:
        result = CompiledArtifact("k-artifact", False, 0.1)
        lifecycle.finish_compile(s, job_id=first, owner="c", result=result)


def test_submit_writes_every_task_in_chunks_and_reuse_gives_one_compile_to_all(api, bulk_settings):  # type: ignore[no-untyped-def]
    make_tenant(api, "lab")
    alice = make_user(api, "lab", "alice")
    array_id = _array(api, alice)
    assert _states(bulk_settings, array_id) == {"queued": N}
    _compile_first(bulk_settings, array_id)
    cycles = 0
    while _states(bulk_settings, array_id)["queued"]:
        stats = run_cycle(bulk_settings)
        assert stats.reused <= CHUNK, "a cycle reuses at most one chunk"
        cycles += 1
        assert cycles < 20
    assert cycles >= (N - 1) // CHUNK, "the reuse was spread over cycles"
    url = bulk_settings.resolved_database_url
    with session_scope(url) as s:
        task = s.get(Job, f"{array_id}_{N - 1}")
        assert task is not None and task.compile_key == "k-artifact" and task.compile_cache_hit
        trail = s.execute(
            select(JobEvent.from_state, JobEvent.to_state)
            .where(JobEvent.job_id == task.id)
            .order_by(JobEvent.id)
        ).all()
        assert [tuple(t) for t in trail] == [
            (None, "queued"),
            ("queued", "compiling"),
            ("compiling", "pending"),
        ]
        compiled = s.execute(
            select(func.count()).where(
                Job.array_job_id == array_id, Job.compile_cache_hit.is_(False)
            )
        ).scalar_one()
        assert compiled == 1


def test_cancel_ends_waiting_tasks_and_stops_running_ones(api, bulk_settings):  # type: ignore[no-untyped-def]
    make_tenant(api, "lab")
    alice = make_user(api, "lab", "alice")
    array_id = _array(api, alice)
    url = bulk_settings.resolved_database_url
    _compile_first(bulk_settings, array_id)
    for _ in range(3):
        run_cycle(bulk_settings)  # reuse, then placement: some tasks run
    with session_scope(url) as s:  # two tasks already ended on their own
        for index in (5, 6):
            s.execute(update(Job).where(Job.id == f"{array_id}_{index}").values(state="succeeded"))
    before = _states(bulk_settings, array_id)
    running = before["running"]
    assert running > 0 and before["pending"] > 0 and before["queued"] > 0

    r = api.post(f"/api/v1/jobs/{array_id}/cancel", headers=alice)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["changed_count"] == N - 2 and body["unchanged_count"] == 2
    assert len(body["changed"]) == min(N - 2, 1000)
    assert {u["id"]: u["why"] for u in body["unchanged"]} == {
        f"{array_id}_5": "already succeeded",
        f"{array_id}_6": "already succeeded",
    }
    assert _states(bulk_settings, array_id) == {
        "cancelled": N - 2 - running,
        "cancelling": running,
        "succeeded": 2,
    }
    with session_scope(url) as s:
        flagged = s.execute(
            select(func.count()).where(Job.array_job_id == array_id, Job.cancel_requested.is_(True))
        ).scalar_one()
        assert flagged == N - 2
        ends = s.execute(
            select(JobEvent.to_state, func.count())
            .join(Job, Job.id == JobEvent.job_id)
            .where(Job.array_job_id == array_id, JobEvent.reason == "cancelled by alice")
            .group_by(JobEvent.to_state)
        ).all()
        assert dict(ends) == {"cancelled": N - 2 - running, "cancelling": running}
        records = s.execute(
            select(JobAccounting.state, func.count())
            .where(JobAccounting.array_job_id == array_id)
            .group_by(JobAccounting.state)
        ).all()
        assert dict(records) == {"cancelled": N - 2 - running}, "one record per ended task"
        logs = s.execute(
            select(func.count()).where(JobLog.line == "cancelled by alice")
        ).scalar_one()
        assert logs == N - 2
        a_running = s.execute(
            select(Job.id).where(Job.array_job_id == array_id, Job.state == "cancelling")
        ).scalar()
        assert lifecycle.read_flags(s, job_id=str(a_running), owner="nobody") is None
    again = api.post(f"/api/v1/jobs/{array_id}/cancel", headers=alice).json()
    assert again["changed_count"] == 0 and again["unchanged_count"] == N
    mallory = make_user(api, "lab", "mallory")
    denied = api.post(f"/api/v1/jobs/{array_id}/hold", headers=mallory).json()
    assert denied["changed_count"] == 0 and "belongs to alice" in denied["unchanged"][0]["why"]
    other = (make_tenant(api, "else"), make_user(api, "else", "eve"))[1]
    assert api.post(f"/api/v1/jobs/{array_id}/cancel", headers=other).status_code == 404


def test_hold_release_and_an_admins_hold(api, bulk_settings):  # type: ignore[no-untyped-def]
    make_tenant(api, "lab")
    alice = make_user(api, "lab", "alice")
    array_id = _array(api, alice)
    api.post(f"/api/v1/jobs/{array_id}_0/cancel", headers=alice).raise_for_status()
    held = api.post(f"/api/v1/jobs/{array_id}/hold", headers=alice).json()
    assert held["changed_count"] == N - 1 and held["unchanged_count"] == 1
    assert held["unchanged"][0]["why"].endswith("only a job that has not started can be held")
    for _ in range(2):
        run_cycle(bulk_settings)
    assert _states(bulk_settings, array_id) == {"queued": N - 1, "cancelled": 1}
    url = bulk_settings.resolved_database_url
    with session_scope(url) as s:
        reasons = Counter(
            s.execute(select(Job.reason).where(Job.array_job_id == array_id)).scalars()
        )
        assert reasons["JobHeldUser"] == N - 1, "the scheduler explains every held task"
    admin = api.post(f"/api/v1/jobs/{array_id}/hold", headers=ADMIN).json()
    assert admin["changed_count"] == N - 1, "an admin's hold replaces the user's"
    refused = api.post(f"/api/v1/jobs/{array_id}/release", headers=alice).json()
    assert refused["changed_count"] == 0
    whys = {u["id"]: u["why"] for u in refused["unchanged"]}
    assert whys[f"{array_id}_1"].endswith("held by an administrator; only one can release it")
    assert whys[f"{array_id}_0"] == "already released (not held)"
    freed = api.post(f"/api/v1/jobs/{array_id}/release", headers=ADMIN).json()
    assert freed["changed_count"] == N - 1
    with session_scope(url) as s:
        rows = s.execute(
            select(Job.hold, Job.reason).where(Job.array_job_id == array_id, Job.state == "queued")
        ).all()
        assert {tuple(r) for r in rows} == {(None, None)}, "released and to be explained afresh"


def test_requeue_asks_every_running_task_to_checkpoint(api, bulk_settings):  # type: ignore[no-untyped-def]
    make_tenant(api, "lab")
    alice = make_user(api, "lab", "alice")
    array_id = _array(api, alice, "0-59")
    _compile_first(bulk_settings, array_id)
    for _ in range(3):
        run_cycle(bulk_settings)
    running = _states(bulk_settings, array_id)["running"]
    assert running > 0
    r = api.post(f"/api/v1/jobs/{array_id}/requeue", params={"hold": "true"}, headers=alice)
    body = r.json()
    assert body["changed_count"] == running and body["unchanged_count"] == 60 - running
    assert {c["hold"] for c in body["changed"]} == {"user"}
    with session_scope(bulk_settings.resolved_database_url) as s:
        flagged = s.execute(
            select(func.count()).where(
                Job.array_job_id == array_id, Job.preempt_requested.is_(True)
            )
        ).scalar_one()
        assert flagged == running


def test_cancel_while_the_scheduler_places_tasks_leaves_none_behind(api, bulk_settings):  # type: ignore[no-untyped-def]
    make_tenant(api, "lab")
    alice = make_user(api, "lab", "alice")
    array_id = _array(api, alice)
    _compile_first(bulk_settings, array_id)
    stop = threading.Event()
    errors: list[BaseException] = []

    def scheduler() -> None:
        while not stop.is_set():
            try:
                run_cycle(bulk_settings)
            except Exception as exc:  # a cycle that lost a race is retried, as the loop does
                if "changed concurrently" not in str(exc):
                    errors.append(exc)

    thread = threading.Thread(target=scheduler)
    thread.start()
    try:
        run_cycle_seen = 0
        while _states(bulk_settings, array_id)["pending"] == 0 and run_cycle_seen < 50:
            run_cycle_seen += 1
            stop.wait(0.05)
        r = api.post(f"/api/v1/jobs/{array_id}/cancel", headers=alice)
        assert r.status_code == 202, r.text
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
    states = _states(bulk_settings, array_id)
    assert set(states) <= {"cancelled", "cancelling"}, states
    assert sum(states.values()) == N
    with session_scope(bulk_settings.resolved_database_url) as s:
        running_unflagged = s.execute(
            select(func.count()).where(
                Job.array_job_id == array_id,
                Job.state.in_(("running", "cancelling")),
                Job.cancel_requested.is_(False),
            )
        ).scalar_one()
        assert running_unflagged == 0


def test_admission_limits_refuse_with_the_numbers(settings):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    limited = settings.updated(max_queued_jobs=50, max_array_tasks=40)
    with TestClient(create_app(limited)) as api:
        make_tenant(api, "lab")
        alice = make_user(api, "lab", "alice")
        big = submit(api, alice, spec("big", array="0-40"))
        assert big.status_code == 422
        assert "at most 40 tasks" in big.json()["detail"]
        assert "max_array_tasks" in big.json()["detail"]
        assert submit(api, alice, spec("a", array="0-39")).status_code == 201
        over = submit(api, alice, spec("b", array="0-19"))
        assert over.status_code == 429
        assert "already has 40 unfinished jobs and 20 more" in over.json()["detail"]
        assert "max_queued_jobs=50" in over.json()["detail"]
        for _ in range(10):
            assert submit(api, alice).status_code == 201
        assert submit(api, alice).status_code == 429, "the 51st unfinished job is refused"
        make_tenant(api, "roomy", max_queued_jobs=100)
        bob = make_user(api, "roomy", "bob")
        assert submit(api, bob, spec("c", array="0-39")).status_code == 201
        assert submit(api, bob, spec("d", array="0-39")).status_code == 201, "its quota wins"
