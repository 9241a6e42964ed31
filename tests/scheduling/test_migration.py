"""Defragmentation by migration: a running checkpointing job moves so a blocked job starts."""

from __future__ import annotations

from dataclasses import replace

from sam_server.replay.sim import CHECKPOINT_EVERY_S, MOVE_COST_S, ClusterSpec, simulate
from sam_server.replay.swf import TraceJob
from sam_server.scheduling import PolicyConfig, plan
from sam_server.scheduling.model import easy_config

from .factories import job, running, snapshot

NOW = 5000.0
WAFER = [("w0", 4, 4)]
MOVES = PolicyConfig(suspend_factor=0.0)
"""Migration alone: with selective suspension on, the blocked job below (slowdown so far 7)
would stop job 1 instead (suspension is tried first)."""


def _case(**mover: object):
    """A 4x4 wafer: job 1 (2x2) in the middle of the top half, job 2 across the bottom half,
    both with hours to go; job 3 (2x2) has waited an hour and fits nowhere, but it would if
    job 1 moved right by one column."""
    a, a_alloc = running(1, 0, 1, 2, 2, limit=20000.0, **mover)  # type: ignore[arg-type]
    b, b_alloc = running(2, 2, 0, 2, 4, limit=20000.0)
    blocked = job(3, 2, 2, submitted=NOW - 3600.0, limit=600.0)
    return snapshot(WAFER, [a, b, blocked], {"w0": [a_alloc, b_alloc]}, config=MOVES)


def test_a_job_moves_so_that_the_blocked_job_starts_in_the_space_it_leaves() -> None:
    p = plan(_case(), NOW)
    assert [(m.job_id, m.for_job_id, m.to) for m in p.preemptions] == [(1, 3, ("w0", 0, 2, 2, 2))]
    assert "migrated to w0" in p.preemptions[0].reason
    assert p.starts == []  # the mover checkpoints first
    assert (p.reservation.row, p.reservation.col, p.reservation.start_time) == (0, 0, NOW)
    assert any("1" in r.message for r in p.waiting[3].reasons)  # it waits for the move


def test_no_move_when_off_bounded_too_young_or_not_checkpointing() -> None:
    assert plan(_case(), NOW, replace(MOVES, migration=False)).preemptions == []
    assert plan(_case(), NOW, easy_config()).preemptions == []
    assert plan(_case(preempt_count=3), NOW).preemptions == []  # the per-job bound
    assert plan(_case(preemptible=False), NOW).preemptions == []
    assert plan(_case(started=NOW - 60.0), NOW).preemptions == []  # ran under the minimum
    # the blocked job would start soon anyway: not worth a move
    soon = replace(MOVES, migrate_min_gain_s=10 * 20000.0)
    assert plan(_case(), NOW, soon).preemptions == []


def test_the_simulation_charges_a_move_and_the_blocked_job_waits_less() -> None:
    """A replay where one move happens: the 8-PE job it makes room for starts two thousand
    seconds sooner (the max wait falls); the moved job pays its steps since the last checkpoint
    plus MOVE_COST_S, so it ends later (here it ends last: the makespan grows)."""
    rows = [
        (1, 0.0, 700.0, 4),
        (2, 100.0, 20000.0, 2),
        (3, 1100.0, 700.0, 8),
        (4, 1200.0, 700.0, 4),
        (5, 2200.0, 20000.0, 8),
        (6, 2300.0, 700.0, 4),
        (7, 3300.0, 700.0, 8),
        (8, 4300.0, 700.0, 2),
    ]
    trace = [TraceJob(i, t, run, run, procs, "u") for i, t, run, procs in rows]
    spec = ClusterSpec(1, 4, 4, 1)
    moved = simulate(trace, spec, MOVES, "sam")
    still = simulate(trace, spec, replace(MOVES, migration=False), "sam")
    assert (moved.migrations, still.migrations) == (1, 0)
    assert MOVE_COST_S < moved.moved_cost_s < MOVE_COST_S + CHECKPOINT_EVERY_S
    assert moved.max_wait_s < still.max_wait_s
    assert moved.avg_bounded_slowdown < still.avg_bounded_slowdown
    assert moved.makespan_s > still.makespan_s
