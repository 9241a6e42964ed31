"""Reservations: the earliest start from time limits, and backfill that never delays it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sam_server.scheduling import easy_config, plan
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.reservation import TimedRect, earliest_start

from .factories import job, overlaps, running, snapshot


def test_the_start_is_the_end_of_the_last_job_that_must_leave() -> None:
    held = [
        TimedRect((0, 0, 4, 4), 50.0),
        TimedRect((0, 4, 4, 4), 80.0),
        TimedRect((4, 0, 4, 8), 30.0),
    ]
    # 8x4 needs the left half: jobs ending at 50 and 30 must leave
    found = earliest_start(8, 4, [(8, 8, held)], 10.0, "best_fit")
    assert found is not None and found.start == 50.0 and found.col == 0
    assert earliest_start(8, 8, [(8, 8, held)], 10.0, "best_fit").start == 80.0
    assert earliest_start(9, 1, [(8, 8, held)], 10.0, "best_fit") is None
    never = [TimedRect((0, 0, 8, 8), math.inf)]
    assert earliest_start(2, 2, [(8, 8, never), None], 0.0, "first_fit") is None


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 200)), min_size=1, max_size=8
    ),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_the_reserved_rectangle_is_free_at_its_start_time(held_jobs, h, w) -> None:
    space = FreeSpace.of(8, 8, [])
    held = []
    for rows, cols, end in held_jobs:
        if space.fits(rows, cols):
            r, c = next(
                (m[0], m[1]) for m in space.mers if m[2] - m[0] >= rows and m[3] - m[1] >= cols
            )
            space.occupy((r, c, rows, cols))
            held.append(TimedRect((r, c, rows, cols), float(end)))
    found = earliest_start(h, w, [(8, 8, held)], 0.0, "best_fit")
    assert found is not None
    rect = (found.row, found.col, h, w)
    assert all(t.end <= found.start for t in held if overlaps(rect, t.rect))
    # and it is the earliest: just before it (jobs ending at the start still there) nothing fits
    if found.start > 0.0:
        assert not FreeSpace.of(8, 8, [t.rect for t in held if t.end >= found.start]).fits(h, w)


def test_backfilled_jobs_never_touch_the_reservation_unless_they_end_first() -> None:
    held, alloc = running(1, 0, 0, 6, 10, limit=300.0)
    jobs = [held, job(2, 10, 10, submitted=0.0)] + [
        job(10 + i, 2, 3, submitted=1.0 + i, limit=float(50 * (i + 1))) for i in range(8)
    ]
    p = plan(snapshot([("w0", 10, 10)], jobs, {"w0": [alloc]}, config=easy_config()), 0.0)
    res = p.reservation
    assert res is not None and res.job_id == 2 and res.start_time == 300.0
    limits = {j.id: j.time_limit_s for j in jobs}
    assert p.starts
    for s in p.starts:
        if overlaps((s.row, s.col, s.rows, s.cols), (res.row, res.col, res.rows, res.cols)):
            assert limits[s.job_id] <= res.start_time
