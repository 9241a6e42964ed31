"""The planning cycle's shortcuts decide exactly as the plain computation they replace."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam_server.scheduling import PolicyQuota, TenantState
from sam_server.scheduling.geometry import FreeSpace, pareto_front, table_front
from sam_server.scheduling.placement import FitIndex, best_fit_on, choose_placement
from sam_server.scheduling.quota import QuotaLedger
from tests.scheduling.factories import job
from tests.scheduling.test_plain_helpers import plain_best_fit

rect = st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(1, 6), st.integers(1, 6))


def _space(rects: list[tuple[int, int, int, int]]) -> FreeSpace:
    """A 12x12 wafer with every rectangle of `rects` that does not overlap an earlier one."""
    space = FreeSpace.of(12, 12, [])
    for r in rects:
        if r[0] + r[2] <= 12 and r[1] + r[3] <= 12 and space.fits(r[2], r[3]):
            inside = any(
                m[0] <= r[0] and m[1] <= r[1] and m[2] >= r[0] + r[2] and m[3] >= r[1] + r[3]
                for m in space.mers
            )
            if inside:
                space.occupy(r)
    return space


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(rect, max_size=8), min_size=1, max_size=5),
    st.integers(1, 6),
    st.integers(1, 6),
)
def test_best_fit_skipping_wafers_picks_what_scoring_every_wafer_picks(wafers, rows, cols) -> None:
    spaces: list[FreeSpace | None] = [_space(w) for w in wafers]
    every = [
        ((*found[0], i, found[1], found[2]), i)
        for i, s in enumerate(spaces)
        if s is not None and (found := best_fit_on(s, rows, cols)) is not None
    ]
    chosen = choose_placement(spaces, rows, cols, "best_fit")
    if not every:
        assert chosen is None
        return
    score, wafer = min(every)
    assert chosen is not None
    assert (chosen.score, chosen.wafer_index) == (score, wafer)


@settings(max_examples=80, deadline=None)
@given(st.lists(rect, max_size=10), st.integers(1, 12), st.integers(1, 12))
def test_best_fit_scores_as_placing_the_job_at_every_corner(rects, rows, cols) -> None:
    space = _space(rects)
    assert best_fit_on(space, rows, cols) == plain_best_fit(space, rows, cols)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.lists(rect, max_size=8)), max_size=4),
    st.integers(-1, 14),
    st.integers(0, 14),
)
def test_fit_index_fits_exactly_when_some_wafer_has_a_mer_that_holds_the_shape(
    wafers, rows, cols
) -> None:
    spaces = [None if w is None else _space(w) for w in wafers]
    if spaces and spaces[-1] is not None:  # a wafer of other dimensions
        spaces[-1] = FreeSpace.of(7, 13, [(r, c, h, w) for r, c, h, w in wafers[-1] if r < 2])
    plain = any(
        m[2] - m[0] >= rows and m[3] - m[1] >= cols for s in spaces if s is not None for m in s.mers
    )
    assert FitIndex(spaces).fits(rows, cols) == plain
    assert [s.fits(rows, cols) for s in spaces if s is not None] == [
        any(m[2] - m[0] >= rows and m[3] - m[1] >= cols for m in s.mers)
        for s in spaces
        if s is not None
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40),
    st.integers(0, 5),
    st.one_of(st.none(), st.integers(0, 60)),
    st.one_of(st.none(), st.integers(0, 6)),
    st.one_of(st.none(), st.integers(0, 4)),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_quota_allows_exactly_when_no_quota_reason_blocks(
    used_pes, used_jobs, max_pes, max_running, max_queued, rows, cols
) -> None:
    quota = PolicyQuota(max_pes=max_pes, max_running_jobs=max_running, max_queued_jobs=max_queued)
    jobs = [job(k, 1, 1, state="running", started=0.0) for k in range(used_jobs)]
    jobs += [job(100 + k, rows, cols, submitted=float(k)) for k in range(6)]
    ledger = QuotaLedger.of({"t": TenantState(quota)}, jobs)
    ledger.running_pes["t"] = used_pes
    for j in jobs[used_jobs:]:
        assert ledger.allows(j) == (not ledger.blocks(j))
    assert ledger.allows(job(999, 1, 1, tenant="other"))


@pytest.mark.parametrize("seed", range(20))
def test_table_front_is_the_pareto_front_of_the_free_rectangles(seed: int) -> None:
    """FitIndex derives the free rectangles' front (for cut shapes) from its widths table:
    the same pairs as the Pareto front of every maximal free rectangle's sides."""
    rng = random.Random(seed)
    space = FreeSpace.of(23, 34, [])
    for _ in range(rng.randint(0, 12)):
        r, c = rng.randint(1, 9), rng.randint(1, 12)
        if space.fits(r, c):
            spot = next(m for m in space.mers if m[2] - m[0] >= r and m[3] - m[1] >= c)
            space.occupy((spot[0], spot[1], r, c))
    sides = [(m[2] - m[0], m[3] - m[1]) for m in space.mers]
    assert table_front(space.widths().tolist()) == pareto_front(sides)
