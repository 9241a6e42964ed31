"""The planning cycle: order, quotas, reservation and backfill, reasons, determinism."""

from __future__ import annotations

import random

import pytest

from sam_server.scheduling import PolicyConfig, PolicyQuota, easy_config, fcfs_config, plan
from sam_server.scheduling.priority import size_factor
from sam_server.scheduling.reasons import REASON_CODES

from .factories import job, overlaps, running, snapshot

W10 = [("w0", 10, 10)]


def codes(p, job_id) -> list[str]:
    return [r.code for r in p.waiting[job_id].reasons]


def test_an_empty_wafer_starts_the_job_in_its_corner() -> None:
    p = plan(snapshot(W10, [job(1, 4, 6)]), 0.0)
    assert [(s.job_id, s.wafer_id, s.row, s.col, s.rows, s.cols) for s in p.starts] == [
        (1, "w0", 0, 0, 4, 6)
    ]
    assert p.waiting == {}
    assert p.wafer_metrics["w0"].free_pes == 100 - 24


def test_higher_class_runs_first_when_only_one_fits() -> None:
    jobs = [job(1, 10, 10, cls="low"), job(2, 10, 10, cls="high", submitted=5.0)]
    p = plan(snapshot(W10, jobs), 10.0)
    assert [s.job_id for s in p.starts] == [2]
    assert p.waiting[1].position == 1
    assert p.waiting[1].priority.factors["priority_class"] == 0.0


def test_priority_factors_are_in_unit_range_and_sum_to_the_total() -> None:
    cfg = PolicyConfig()
    jobs = [
        job(i, 1 + i, 2, cls=c, submitted=-i * 1e5) for i, c in enumerate(["low", "urgent", "high"])
    ]
    held, alloc = running(9, 0, 0, 10, 10)
    p = plan(snapshot(W10, [*jobs, held], {"w0": [alloc]}, usage={"t": 5e6}), 0.0)
    for e in p.waiting.values():
        assert all(0.0 <= v <= 1.0 for v in e.priority.factors.values())
        assert e.priority.total == pytest.approx(sum(e.priority.weighted.values()))
        assert e.priority.weighted["age"] == pytest.approx(
            cfg.weights.age * e.priority.factors["age"]
        )
    totals = [p.waiting[j].priority.total for j in p.order]
    assert totals == sorted(totals, reverse=True)


def test_tenant_over_its_share_waits_behind_one_under_it() -> None:
    jobs = [job(1, 10, 10, tenant="heavy"), job(2, 10, 10, tenant="light", submitted=1.0)]
    p = plan(snapshot(W10, jobs, usage={"heavy": 1e9, "light": 1e3}), 2.0)
    assert [s.job_id for s in p.starts] == [2]
    # heavy used all the usage on half the shares: 2^-(1/0.5) = 0.25
    assert p.waiting[1].priority.factors["fair_share"] == pytest.approx(0.25, abs=1e-3)


@pytest.mark.parametrize(
    ("quota", "held_pes", "expected"),
    [
        (PolicyQuota(max_pes=45), (5, 8), ["QuotaMaxPes"]),
        (PolicyQuota(max_running_jobs=1), (1, 1), ["QuotaMaxRunningJobs"]),
        (
            PolicyQuota(max_pes=40, max_running_jobs=1),
            (5, 8),
            ["QuotaMaxPes", "QuotaMaxRunningJobs"],
        ),
        (PolicyQuota(max_pes=100, max_running_jobs=2), (1, 1), []),
    ],
)
def test_a_job_over_a_quota_waits_with_every_quota_reason(quota, held_pes, expected) -> None:
    held, alloc = running(1, 0, 0, *held_pes)
    p = plan(snapshot([("w0", 20, 20)], [held, job(2, 2, 5)], {"w0": [alloc]}, {"t": quota}), 0.0)
    if expected:
        assert p.starts == [] and codes(p, 2) == expected
    else:
        assert [s.job_id for s in p.starts] == [2]


def test_queued_jobs_beyond_max_queued_wait_and_are_not_compiled() -> None:
    jobs = [job(i, 2, 2, state="queued", submitted=float(i)) for i in range(4)]
    p = plan(
        snapshot(W10, jobs, quotas={"t": PolicyQuota(max_queued_jobs=2)}, compile_slots=4), 5.0
    )
    assert sorted(p.compiles) == [0, 1]
    assert "QuotaMaxQueuedJobs" in codes(p, 3)
    assert codes(p, 0)[0] == "CompilePending"


def test_compiles_go_to_the_highest_priority_jobs_up_to_the_free_slots() -> None:
    jobs = [
        job(1, 2, 2, state="queued", cls="low"),
        job(2, 2, 2, state="queued", cls="urgent"),
        job(3, 2, 2, state="compiling"),
    ]
    p = plan(snapshot(W10, jobs, compile_slots=1), 0.0)
    assert p.compiles == [2]
    assert codes(p, 3) == ["Compiling"]
    assert "waiting for a free compile server" in p.waiting[1].reasons[0].message


def test_the_top_blocked_job_gets_a_reservation_and_short_jobs_backfill_around_it() -> None:
    held, alloc = running(1, 0, 0, 10, 6, limit=100.0)  # cols 0-5 busy until t=100
    big = job(2, 10, 8, submitted=0.0, limit=50.0)  # needs 8 columns: waits for job 1
    short = job(3, 10, 4, submitted=1.0, limit=50.0)  # free cols 6-9, ends at 60 < 100: backfills
    long = job(4, 10, 4, submitted=2.0, limit=500.0)  # would still hold cols 6-9 at t=100
    cfg = easy_config()
    p = plan(snapshot(W10, [held, big, short, long], {"w0": [alloc]}, config=cfg), 10.0)
    assert p.reservation is not None
    assert (p.reservation.job_id, p.reservation.start_time) == (2, 100.0)
    assert [s.job_id for s in p.starts] == [3]
    assert "ReservedFor" in codes(p, 4) or "Resources" in codes(p, 4)
    assert p.waiting[2].eta == 100.0
    assert codes(p, 2) == ["Resources"]


def test_backfill_fills_space_outside_the_reserved_rectangle_with_long_jobs() -> None:
    held, alloc = running(1, 0, 0, 5, 10, limit=100.0)  # top half busy
    big = job(2, 10, 5, submitted=0.0)  # needs the whole height: reservation at t=100
    long = job(3, 5, 5, submitted=1.0, limit=1000.0)  # fits in the bottom half, outside it
    p = plan(snapshot(W10, [held, big, long], {"w0": [alloc]}, config=easy_config()), 0.0)
    res = p.reservation
    assert res is not None and res.start_time == 100.0
    (s,) = p.starts
    assert not overlaps((s.row, s.col, s.rows, s.cols), (res.row, res.col, res.rows, res.cols))


def test_fcfs_starts_nothing_behind_a_blocked_job() -> None:
    held, alloc = running(1, 0, 0, 10, 6)
    jobs = [held, job(2, 10, 8, submitted=0.0), job(3, 1, 1, submitted=1.0)]
    p = plan(snapshot(W10, jobs, {"w0": [alloc]}, config=fcfs_config()), 5.0)
    assert p.starts == []
    assert codes(p, 3) == ["Priority"]
    assert p.waiting[3].position == 2


def test_fragmented_and_unavailable_wafers_are_told_apart() -> None:
    checker = [
        running(10 + i, r, c, 1, 1)
        for i, (r, c) in enumerate((r, c) for r in range(4) for c in range(4) if (r + c) % 2 == 0)
    ]
    jobs = [j for j, _ in checker] + [job(1, 2, 2)]
    p = plan(
        snapshot(
            [("w0", 4, 4), ("w1", 8, 8)], jobs, {"w0": [a for _, a in checker]}, offline={"w1"}
        ),
        0.0,
    )
    assert codes(p, 1) == ["Fragmented"]
    p2 = plan(snapshot([("w0", 4, 4), ("w1", 8, 8)], [job(1, 6, 6)], offline={"w1"}), 0.0)
    assert codes(p2, 1) == ["WaferUnavailable"] and p2.waiting[1].eta is None


def test_every_waiting_job_has_known_reasons_positions_and_etas() -> None:
    rng = random.Random(7)
    jobs = [
        job(
            i,
            rng.randint(1, 10),
            rng.randint(1, 10),
            state=rng.choice(["queued", "pending", "compiling"]),
            tenant=rng.choice("ab"),
            submitted=float(i),
            limit=rng.randint(10, 1000),
        )
        for i in range(60)
    ]
    p = plan(snapshot(W10 + [("w1", 6, 6)], jobs, compile_slots=3), 100.0)
    positions = sorted(e.position for e in p.waiting.values())
    assert positions == list(range(1, len(p.waiting) + 1))
    assert set(p.waiting) | {s.job_id for s in p.starts} == {j.id for j in jobs}
    for e in p.waiting.values():
        assert e.reasons and all(r.code in REASON_CODES and r.message for r in e.reasons)
        assert e.eta is None or e.eta >= 100.0


def test_the_same_snapshot_gives_the_same_plan_in_any_job_order() -> None:
    rng = random.Random(3)
    jobs = [
        job(i, rng.randint(1, 6), rng.randint(1, 6), submitted=float(rng.randint(0, 5)))
        for i in range(40)
    ]
    a = plan(snapshot(W10 + [("w1", 8, 8)], jobs), 50.0)
    rng.shuffle(jobs)
    b = plan(snapshot(W10 + [("w1", 8, 8)], jobs), 50.0)
    assert a == b


def test_short_jobs_go_first_while_young_but_seniority_rules_past_the_age_cap() -> None:
    # (the queue order alone: with suspension the 10-s job, ~500x behind, would go first)
    cfg = PolicyConfig(age_cap_s=1000.0, reserve_after_s=0.0, suspend_factor=0.0)
    held, alloc = running(9, 0, 0, 10, 10, limit=50.0)
    young = [job(1, 10, 10, submitted=90.0, limit=5000.0), job(2, 1, 1, submitted=95.0, limit=10.0)]
    p = plan(snapshot(W10, [held, *young], {"w0": [alloc]}, config=cfg), 100.0)
    assert p.order == [2, 1]  # the short job outranks the long one of about the same age
    old = [job(1, 10, 10, submitted=0.0, limit=5000.0), job(2, 1, 1, submitted=50.0, limit=10.0)]
    p = plan(snapshot(W10, [held, *old], {"w0": [alloc]}, config=cfg), 5000.0)
    assert p.order == [1, 2]  # both past the cap: the older long job is first
    assert p.reservation is not None and p.reservation.job_id == 1


def test_job_size_is_measured_in_time_so_a_short_wide_job_outranks_a_long_narrow_one() -> None:
    # 1 PE for an hour is fewer PE-seconds (3,600) than the whole wafer for a minute (6,000), but
    # the minute-long job frees the wafer sooner: it starts first and the narrow job waits for it.
    narrow_long = job(1, 1, 1, submitted=0.0, limit=3600.0)
    wide_short = job(2, 10, 10, submitted=1.0, limit=60.0)
    p = plan(snapshot(W10, [narrow_long, wide_short]), 2.0)
    assert [s.job_id for s in p.starts] == [2]
    assert p.order == [1]
    cfg = PolicyConfig()
    assert size_factor(wide_short, 100, cfg) > size_factor(narrow_long, 100, cfg)
    # the area does not count: equal time limits score the same
    assert size_factor(job(3, 1, 1, limit=60.0), 100, cfg) == size_factor(wide_short, 100, cfg)


def test_only_a_job_that_waited_reserve_after_gets_the_reservation() -> None:
    held, alloc = running(9, 0, 0, 10, 6, limit=100.0)
    old_big = job(1, 10, 8, submitted=0.0, limit=5000.0)
    young_small = job(2, 10, 7, submitted=990.0, limit=10.0)  # outranks it, blocked a moment
    cfg = PolicyConfig(reserve_after_s=600.0)
    p = plan(snapshot(W10, [held, old_big, young_small], {"w0": [alloc]}, config=cfg), 1000.0)
    assert p.order == [2, 1]
    assert p.reservation is not None and p.reservation.job_id == 1
    easy_like = plan(
        snapshot(
            W10,
            [held, old_big, young_small],
            {"w0": [alloc]},
            config=PolicyConfig(reserve_after_s=0.0, reservations=1, protect_oldest=0),
        ),
        1000.0,
    )
    assert easy_like.reservation is not None and easy_like.reservation.job_id == 2
    # SAM's default: the oldest job goes first and reserves; the top blocked job reserves too,
    # after it (conservative backfill for the top two).
    cfg = PolicyConfig(reserve_after_s=0.0)
    both = plan(
        snapshot(W10, [held, old_big, young_small], {"w0": [alloc]}, config=cfg),
        1000.0,
    )
    assert [(r.job_id, r.start_time) for r in both.reservations] == [(1, 1000.0), (2, 6000.0)]
