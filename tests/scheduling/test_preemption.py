"""Preemption: only for a higher class, only when it is the only way, with thrash protection."""

from __future__ import annotations

import pytest

from sam_server.scheduling import PolicyConfig, plan

from .factories import job, running, snapshot

W10 = [("w0", 10, 10)]
CFG = PolicyConfig(
    min_run_before_preempt_s=600.0,
    max_preemptions_per_job=3,
    reserve_after_s=0.0,
    suspend_factor=0.0,  # preemption by class alone (suspension: test_suspension)
)


def _full_wafer(cls: str = "low", started: float = 0.0, count: int = 0, preemptible: bool = True):
    """Two jobs holding the left and right halves of the wafer (job 2 started 100 s later)."""
    kw = {"cls": cls, "preempt_count": count, "preemptible": preemptible, "limit": 10_000.0}
    a, aa = running(1, 0, 0, 10, 5, started=started, **kw)
    b, bb = running(2, 0, 5, 10, 5, started=started + 100.0, **kw)
    return [a, b], {"w0": [aa, bb]}


def test_an_urgent_job_preempts_the_fewest_youngest_lower_class_jobs() -> None:
    jobs, allocs = _full_wafer()
    urgent = job(3, 10, 5, cls="urgent")
    p = plan(snapshot(W10, [*jobs, urgent], allocs, config=CFG), 1000.0)
    assert [(x.job_id, x.for_job_id) for x in p.preemptions] == [(2, 3)]  # job 2 started later
    assert [r.code for r in p.waiting[3].reasons] == ["Preempting"]
    assert p.starts == []
    assert p.reservation is not None and (p.reservation.col, p.reservation.start_time) == (
        5,
        1000.0,
    )


@pytest.mark.parametrize(
    ("victims", "now", "preemptor"),
    [
        ({"cls": "low"}, 650.0, "urgent"),  # job 2 ran 550 s < 600 s; job 1 alone is not enough
        ({"cls": "low"}, 500.0, "urgent"),  # neither ran the minimum run time
        ({"cls": "high"}, 5000.0, "high"),  # an equal class never preempts
        ({"cls": "urgent"}, 5000.0, "high"),  # nor does a lower one
        ({"cls": "low", "preemptible": False}, 5000.0, "urgent"),
        ({"cls": "low", "count": 3}, 5000.0, "urgent"),  # preempted too often already
    ],
)
def test_no_preemption_under_the_protections(victims, now, preemptor) -> None:
    jobs, allocs = _full_wafer(**victims)
    p = plan(snapshot(W10, [*jobs, job(3, 10, 10, cls=preemptor)], allocs, config=CFG), now)
    assert p.preemptions == []
    assert p.reservation is not None and p.reservation.start_time > now
    assert [r.code for r in p.waiting[3].reasons] == ["Resources"]


def test_no_preemption_when_the_job_can_start_anyway() -> None:
    a, aa = running(1, 0, 0, 10, 5, cls="low")
    p = plan(snapshot(W10, [a, job(3, 10, 5, cls="urgent")], {"w0": [aa]}, config=CFG), 5000.0)
    assert p.preemptions == [] and [s.job_id for s in p.starts] == [3]


def test_preemption_can_be_switched_off() -> None:
    jobs, allocs = _full_wafer()
    cfg = PolicyConfig(preemption=False, min_run_before_preempt_s=0.0)
    p = plan(snapshot(W10, [*jobs, job(3, 10, 10, cls="urgent")], allocs, config=cfg), 1000.0)
    assert p.preemptions == []
