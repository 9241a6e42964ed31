"""Free-space bookkeeping: maximal empty rectangles, fragmentation, best/first fit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sam_server.scheduling.geometry import FreeSpace, maximal_empty_rects
from sam_server.scheduling.placement import best_fit_on, choose_placement, first_fit_on


def _brute_mers(rows: int, cols: int, grid: np.ndarray) -> set[tuple[int, int, int, int]]:
    found = set()
    for r0 in range(rows):
        for c0 in range(cols):
            for r1 in range(r0 + 1, rows + 1):
                for c1 in range(c0 + 1, cols + 1):
                    if grid[r0:r1, c0:c1].any():
                        continue
                    if (
                        (r0 == 0 or grid[r0 - 1, c0:c1].any())
                        and (r1 == rows or grid[r1, c0:c1].any())
                        and (c0 == 0 or grid[r0:r1, c0 - 1].any())
                        and (c1 == cols or grid[r0:r1, c1].any())
                    ):
                        found.add((r0, c0, r1, c1))
    return found


@st.composite
def wafer_with_rects(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    grid = np.zeros((rows, cols), bool)
    rects = []
    for _ in range(draw(st.integers(0, 6))):
        h, w = draw(st.integers(1, rows)), draw(st.integers(1, cols))
        r, c = draw(st.integers(0, rows - h)), draw(st.integers(0, cols - w))
        if not grid[r : r + h, c : c + w].any():
            grid[r : r + h, c : c + w] = True
            rects.append((r, c, h, w))
    return rows, cols, rects


@settings(max_examples=60, deadline=None)
@given(wafer_with_rects())
def test_mers_are_exactly_the_maximal_empty_rectangles(case) -> None:
    rows, cols, rects = case
    grid = np.zeros((rows, cols), bool)
    for r, c, h, w in rects:
        grid[r : r + h, c : c + w] = True
    got = set(maximal_empty_rects(rows, cols, rects))
    assert got == _brute_mers(rows, cols, grid)


@settings(max_examples=40, deadline=None)
@given(wafer_with_rects(), st.integers(1, 6), st.integers(1, 6))
def test_a_shape_fits_exactly_when_some_free_position_exists(case, h, w) -> None:
    rows, cols, rects = case
    grid = np.zeros((rows, cols), bool)
    for r, c, rh, rw in rects:
        grid[r : r + rh, c : c + rw] = True
    brute = any(
        not grid[r : r + h, c : c + w].any()
        for r in range(rows - h + 1)
        for c in range(cols - w + 1)
    )
    space = FreeSpace.of(rows, cols, rects)
    assert space.fits(h, w) == brute
    spot = best_fit_on(space, h, w)
    assert (spot is not None) == brute
    if spot is not None:
        _, r, c = spot
        assert r + h <= rows and c + w <= cols and not grid[r : r + h, c : c + w].any()


def test_fragmentation_is_zero_on_a_clean_wafer_and_grows_with_holes() -> None:
    assert FreeSpace.of(10, 10, []).fragmentation() == 0.0
    checker = [(r, c, 1, 1) for r in range(10) for c in range(10) if (r + c) % 2 == 0]
    space = FreeSpace.of(10, 10, checker)
    assert space.free_pes == 50
    assert space.largest_free_rect() == (1, 1)
    assert space.fragmentation() == 1 - 1 / 50
    full = FreeSpace.of(4, 4, [(0, 0, 4, 4)])
    assert full.fragmentation() == 0.0 and full.largest_free_rect() == (0, 0)


def test_best_fit_takes_the_tight_hole_and_keeps_the_big_space() -> None:
    # a 10x10 wafer with a 2x2 hole at the top-left boxed in by a busy column and row
    rects = [(0, 2, 3, 1), (2, 0, 1, 2)]
    space = FreeSpace.of(10, 10, rects)
    _, r, c = best_fit_on(space, 2, 2)
    assert (r, c) == (0, 0)
    before = space.largest_free_rect()
    space.occupy((r, c, 2, 2))
    assert space.largest_free_rect() == before


def test_first_fit_is_topmost_then_leftmost_on_the_first_wafer() -> None:
    a = FreeSpace.of(4, 4, [(0, 0, 1, 4), (1, 0, 1, 1)])
    b = FreeSpace.of(4, 4, [])
    assert first_fit_on(a, 1, 1) == (1, 1)
    spot = choose_placement([None, a, b], 3, 4, "first_fit")
    assert spot is not None and spot.wafer_index == 2 and (spot.row, spot.col) == (0, 0)
