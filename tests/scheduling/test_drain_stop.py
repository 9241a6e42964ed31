"""Drain stop: a big job waiting for a wafer to drain stops the few running jobs left in its way
(`drain_stop_share`) instead of leaving the rest of the wafer idle until they end."""

from __future__ import annotations

from dataclasses import replace

from sam_server.scheduling import PolicyConfig, Snapshot, plan
from sam_server.scheduling.model import easy_config

from .factories import job, running, snapshot


def _drain(
    rows_held: int, left: float, *, big: tuple[int, int] = (8, 8), share: float = 0.5
) -> Snapshot:
    """An 8x8 wafer where one job of `rows_held` x 8 rows still runs (`left` seconds to go,
    started at 0) and a job of `big` PEs, eligible since 0, waits for the whole rectangle."""
    straggler, alloc = running(1, 0, 0, rows_held, 8, limit=1_000.0 + left)
    waiting = job(2, big[0], big[1], submitted=0.0, limit=5_000.0)
    return snapshot(
        [("w0", 8, 8)],
        [straggler, waiting],
        {"w0": [alloc]},
        config=PolicyConfig(drain_stop_share=share),
    )


def test_the_last_job_in_the_way_of_a_whole_wafer_job_is_stopped_and_it_starts() -> None:
    decided = plan(_drain(2, 10_000.0), 1_000.0)  # 16 of 64 PEs held, 10,000 s to go
    assert [(p.job_id, p.for_job_id, p.to) for p in decided.preemptions] == [(1, 2, None)]
    assert "drain_stop_share" in decided.preemptions[0].reason
    reserved = decided.reservation
    assert reserved is not None and (reserved.job_id, reserved.start_time) == (2, 1_000.0)


def test_off_it_waits_for_the_drain_as_before() -> None:
    decided = plan(_drain(2, 10_000.0, share=0.0), 1_000.0)
    assert decided.preemptions == []
    assert decided.reservation is not None and decided.reservation.start_time == 11_000.0


def test_jobs_holding_much_of_the_rectangle_or_ending_soon_are_waited_for() -> None:
    assert plan(_drain(5, 10_000.0), 1_000.0).preemptions == []  # 40 of 64 PEs: over half
    assert plan(_drain(2, 1_000.0), 1_000.0).preemptions == []  # ends in less than 1,800 s
    assert plan(_drain(2, 10_000.0), 500.0).preemptions == []  # ran < min_run_before_preempt_s


def test_only_a_big_job_drains_and_a_job_is_stopped_once() -> None:
    small = plan(_drain(2, 10_000.0, big=(7, 4)), 1_000.0)  # 28 PEs: under half the wafer
    assert small.preemptions == []
    snap = _drain(2, 10_000.0)
    stopped_before = tuple(replace(j, preempt_count=1) if j.id == 1 else j for j in snap.jobs)
    assert plan(replace(snap, jobs=stopped_before), 1_000.0).preemptions == []  # suspend_max
    higher = tuple(replace(j, priority_class="high") if j.id == 1 else j for j in snap.jobs)
    assert plan(replace(snap, jobs=higher), 1_000.0).preemptions == []  # never a higher class


def test_the_anchors_never_drain_stop() -> None:
    snap = _drain(2, 10_000.0)
    assert plan(replace(snap, config=easy_config()), 1_000.0).preemptions == []
