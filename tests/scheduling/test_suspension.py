"""Selective suspension: a short job far behind in slowdown stops a long one of its own class
(`suspend_factor`), bounded per job, and what a stopped job's seniority counts from."""

from __future__ import annotations

from dataclasses import replace

from sam_server.scheduling import PolicyConfig, Snapshot, plan
from sam_server.scheduling.fairshare import bounded_slowdown

from .factories import job, running, snapshot


def test_bounded_slowdown_is_bounded_below_by_one_and_by_ten_seconds() -> None:
    assert bounded_slowdown(0.0, 5.0) == 1.0
    assert bounded_slowdown(100.0, 0.0) == 10.0
    assert bounded_slowdown(100.0, 100.0) == 2.0


def _blocked_short_job(factor: float, short_limit: float = 10.0):
    """A 4x4 wafer held by one long job (started at once: slowdown 1) and a 2x2 job of the same
    class, `short_limit` long, that has waited 1,000 s for it."""
    long_job, alloc = running(1, 0, 0, 4, 4, limit=100_000.0, user="a", tenant="a")
    short = job(2, 2, 2, submitted=0.0, limit=short_limit, user="b", tenant="b")
    config = PolicyConfig(suspend_factor=factor)
    return snapshot([("w0", 4, 4)], [long_job, short], {"w0": [alloc]}, config=config)


def test_a_short_job_far_behind_suspends_a_long_one_of_its_class() -> None:
    off = plan(_blocked_short_job(0.0), 1000.0)
    on = plan(_blocked_short_job(2.0), 1000.0)
    assert off.preemptions == []  # same class: no preemption without suspension
    assert [(p.job_id, p.for_job_id) for p in on.preemptions] == [(1, 2)]
    # the victim's log says why: suspended, with both slowdowns so far
    assert on.preemptions[0].reason.startswith("suspended for job 2 of its class")
    assert "101.0" in on.preemptions[0].reason and "1.0" in on.preemptions[0].reason


def test_suspension_needs_the_factor_and_a_shorter_preemptor() -> None:
    # slowdown so far (1000 + 10) / 10 = 101: below 200x the victim's 1
    assert plan(_blocked_short_job(200.0), 1000.0).preemptions == []
    # a preemptor longer than what the victim has left never suspends it
    assert plan(_blocked_short_job(2.0, short_limit=200_000.0), 1000.0).preemptions == []
    # nor before the victim has run min_run_before_preempt_s (600 s)
    assert plan(_blocked_short_job(2.0), 500.0).preemptions == []


def _suspended(snap: Snapshot, **config: float) -> list[int]:
    return [
        p.job_id
        for p in plan(replace(snap, config=replace(snap.config, **config)), 1000.0).preemptions
    ]


def test_a_job_suspended_once_is_suspended_again_only_for_one_far_behind() -> None:
    snap = _blocked_short_job(2.0)
    once = tuple(replace(j, preempt_count=1) if j.id == 1 else j for j in snap.jobs)
    again = replace(snap, jobs=once)
    # the preemptor's slowdown so far is 101, the victim's 1: the first bar is 2 x 1, the bar
    # past suspend_max (1, the default) suspend_again_factor times that
    assert _suspended(again, suspend_again_factor=0.0) == []  # never past suspend_max
    assert _suspended(again, suspend_again_factor=60.0) == []  # 120 > 101: kept running
    assert _suspended(again, suspend_again_factor=50.0) == [1]  # 100 <= 101
    assert _suspended(again) == [1]  # the default, 10: 20 <= 101
    assert _suspended(again, suspend_max=0, suspend_again_factor=0.0) == [1]  # no bound
    # max_preemptions_per_job (3) bounds it whatever the factors
    thrice = tuple(replace(j, preempt_count=3) if j.id == 1 else j for j in snap.jobs)
    assert _suspended(replace(snap, jobs=thrice)) == []


def _stopped_and_fresh(requeue: bool):
    """A 4x4 wafer held till 8,000 s; two whole-wafer jobs wait for it: job 2, eligible since
    0 s but stopped (suspended) at 5,000 s, and job 3, eligible since 1,000 s, never started."""
    held, alloc = running(1, 0, 0, 4, 4, limit=8_000.0)
    stopped = replace(
        job(2, 4, 4, submitted=0.0, limit=500.0), preempt_count=1, last_preempted_at=5_000.0
    )
    fresh = job(3, 4, 4, submitted=1_000.0, limit=500.0)
    config = PolicyConfig(requeue_stopped=requeue, reservations=1)
    return snapshot([("w0", 4, 4)], [held, stopped, fresh], {"w0": [alloc]}, config=config)


def test_a_stopped_job_does_not_take_the_reservation_of_a_job_never_started() -> None:
    kept = plan(_stopped_and_fresh(False), 7_000.0).reservation
    requeued = plan(_stopped_and_fresh(True), 7_000.0).reservation
    assert kept is not None and kept.job_id == 2  # eligible first: it goes first as the oldest
    assert requeued is not None and requeued.job_id == 3  # stopped at 5,000 s: job 3 is older


def _freed_wafer(factor: float, stopped: bool = True):
    """A 4x4 wafer just freed: job 1 (whole wafer, 10,000 s) was suspended at 1,400 s and is
    back in the queue; job 2 (whole wafer, 5,000 s, eligible since 0 s: the oldest) and job 3
    (2x2, 10 s, waited 1,000 s: slowdown so far 101, furthest behind) wait for the wafer too."""
    old = job(2, 4, 4, submitted=0.0, limit=5_000.0, user="a", tenant="a")
    behind = job(3, 2, 2, submitted=500.0, limit=10.0, user="b", tenant="b")
    back = replace(
        job(1, 4, 4, submitted=0.0, limit=10_000.0),
        preempt_count=1,
        last_preempted_at=1_400.0,
        stopped_for=3,
    )
    config = PolicyConfig(suspend_factor=factor)
    jobs = [old, behind, back] if stopped else [old, behind]
    return snapshot([("w0", 4, 4)], jobs, {"w0": []}, config=config)


def test_after_a_stop_the_job_it_was_for_takes_the_space_before_the_oldest() -> None:
    # job 3, which suspended job 1 for this space, starts first, so the space it freed is not
    # taken by the next in line (whom it would then suspend too)
    on = plan(_freed_wafer(10.0), 1_500.0)
    assert [s.job_id for s in on.starts] == [3]
    # a stop that names no waiting job: the job furthest behind (3 again) goes first; with
    # suspension off, the oldest keeps its place at the head of the walk
    for factor, first in ((10.0, 3), (0.0, 2)):
        snap = _freed_wafer(factor)
        unnamed = replace(snap, jobs=tuple(replace(j, stopped_for=None) for j in snap.jobs))
        assert [s.job_id for s in plan(unnamed, 1_500.0).starts] == [first]
    # nor does anything move without a stop
    calm = plan(_freed_wafer(10.0, stopped=False), 1_500.0)
    assert [s.job_id for s in calm.starts] == [2]


def test_the_job_a_stop_was_for_goes_first_even_if_another_is_further_behind() -> None:
    snap = _freed_wafer(10.0)
    # job 4: the whole wafer for 10 s, waited 1,500 s (slowdown 151, further behind than 3)
    further = job(4, 4, 4, submitted=0.0, limit=10.0, user="c", tenant="c")
    on = plan(replace(snap, jobs=(*snap.jobs, further)), 1_500.0)
    assert [s.job_id for s in on.starts] == [3]
