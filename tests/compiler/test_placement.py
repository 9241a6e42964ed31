"""Kernel sizing and placement: disjoint rectangles that cover the region and respect minimums."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.passes.placement import PlacementFailed, SizingInput, balance_areas, size_and_place


@st.composite
def layouts(draw):
    rows = draw(st.integers(1, 24))
    cols = draw(st.integers(1, 24))
    count = draw(st.integers(1, min(12, rows * cols)))
    flops = draw(st.lists(st.integers(0, 10**6), min_size=count, max_size=count))
    mins = draw(
        st.lists(st.integers(1, max(1, rows * cols // (2 * count))), min_size=count, max_size=count)
    )
    return rows, cols, flops, mins


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_placement_partitions_the_region(layout) -> None:
    rows, cols, flops, mins = layout
    try:
        areas, rects = size_and_place(flops, mins, rows, cols)
    except PlacementFailed:
        # Only tight layouts may fail: half the region is never enough slack to need more.
        assert sum(mins) * 2 > rows * cols
        return
    owner = np.full((rows, cols), -1)
    for i, (r, c, h, w) in enumerate(rects):
        assert h >= 1 and w >= 1 and r + h <= rows and c + w <= cols
        assert (owner[r : r + h, c : c + w] == -1).all()
        owner[r : r + h, c : c + w] = i
        assert h * w >= mins[i]
    assert (owner >= 0).all()


def test_area_follows_flops_when_memory_is_not_binding() -> None:
    areas = balance_areas([SizingInput(3000, 1), SizingInput(1000, 1)], 400)
    assert abs(areas[0] / areas[1] - 3) < 0.1


def test_memory_minimum_wins_over_flops_share() -> None:
    areas = balance_areas([SizingInput(10, 50), SizingInput(10**6, 1)], 64)
    assert areas[0] >= 50 and sum(areas) <= 64
