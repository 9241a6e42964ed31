"""Compile slots are shared fairly between tenants: one tenant's many (or slow) models do not
queue ahead of every other tenant's compile, and a waiting job's explanation gives its place in
the compile queue."""

from __future__ import annotations

from sam_server.scheduling import plan
from tests.scheduling.factories import job, snapshot

W = [("w0", 10, 10)]


def _position(p, job_id: int) -> str:  # type: ignore[no-untyped-def]
    reason = p.waiting[job_id].reasons[0]
    assert reason.code == "CompilePending"
    return reason.message


def test_a_later_tenant_gets_the_next_slot_before_the_busy_tenants_backlog() -> None:
    # Tenant a submitted five models first and has one compiling; b submits one afterwards.
    jobs = [job(1, 2, 2, state="compiling", tenant="a", submitted=0.0)]
    jobs += [job(k, 2, 2, state="queued", tenant="a", submitted=float(k)) for k in range(2, 7)]
    jobs += [job(9, 2, 2, state="queued", tenant="b", submitted=50.0)]
    p = plan(snapshot(W, jobs, compile_slots=1), 100.0)
    assert p.compiles == [9]
    assert "position 1 in the compile queue" in _position(p, 2)
    assert "position 5 in the compile queue" in _position(p, 6)


def test_compile_queue_alternates_between_tenants_with_positions() -> None:
    jobs = [job(k, 2, 2, state="queued", tenant="a", submitted=float(k)) for k in range(1, 4)]
    jobs += [job(k, 2, 2, state="queued", tenant="b", submitted=10.0 + k) for k in range(4, 6)]
    p = plan(snapshot(W, jobs, compile_slots=0), 100.0)
    assert p.compiles == []
    order = sorted(p.waiting, key=lambda k: int(_position(p, k).split("position ")[1].split()[0]))
    assert order == [1, 4, 2, 5, 3]


def test_per_tenant_cap_keeps_a_slot_for_other_tenants() -> None:
    jobs = [job(k, 2, 2, state="queued", tenant="a", submitted=float(k)) for k in range(1, 5)]
    snap = snapshot(W, jobs, compile_slots=4)
    capped = plan(snap.__class__(**{**snap.__dict__, "compile_slots_per_tenant": 3}), 100.0)
    assert capped.compiles == [1, 2, 3]
    jobs.append(job(7, 2, 2, state="queued", tenant="b", submitted=90.0))
    snap = snapshot(W, jobs, compile_slots=4)
    both = plan(snap.__class__(**{**snap.__dict__, "compile_slots_per_tenant": 3}), 100.0)
    assert sorted(both.compiles) == [1, 2, 3, 7]


def test_no_cap_uses_every_free_slot() -> None:
    jobs = [job(k, 2, 2, state="queued", tenant="a", submitted=float(k)) for k in range(1, 5)]
    assert plan(snapshot(W, jobs, compile_slots=4), 100.0).compiles == [1, 2, 3, 4]
