"""Flexible regions: the rectangles a job of N PEs may run in, for the policy to choose from.

A job that asks for `region: {pes: N}` or `{rows, cols, flexible: true}` accepts any rectangle
of at least its PEs whose aspect ratio is within a bound and that wastes little area. The
compiler can place a graph on any rows x cols rectangle, so every such shape is buildable; the
policy picks the one that fits the free space best, and the compile for it is a cache hit or
done before the start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

Shape = tuple[int, int]

MAX_ASPECT = 4.0
"""Default bound on max(rows, cols) / min(rows, cols) of a flexible shape."""
MAX_WASTE = 0.125
"""Default bound on the extra PEs of a shape over the job's PEs (12.5%)."""
MAX_SHAPES = 6
"""At most this many shapes per job: each costs a fit test per cycle."""


@lru_cache(maxsize=65536)
def flexible_shapes(
    pes: int,
    wafer_rows: int,
    wafer_cols: int,
    max_aspect: float = MAX_ASPECT,
    max_waste: float = MAX_WASTE,
    limit: int = MAX_SHAPES,
) -> tuple[Shape, ...]:
    """The shapes (rows, cols) a job of `pes` PEs may take on a wafer_rows x wafer_cols wafer.

    Rectangles of at least `pes` PEs, at most `pes * (1 + max_waste)`, aspect <= `max_aspect`,
    that fit the wafer and are not dominated (a shape no smaller in both sides than another is
    dropped: wherever it fits, the smaller one does too). Least area first, then squarest, then
    the wider; at most `limit`. Empty when none exists (the caller keeps the asked shape).
    """
    if pes < 1:
        raise ValueError(f"a region needs at least 1 PE, got {pes}")
    found: list[tuple[tuple[int, float, bool], Shape]] = []
    # rows * cols <= pes * (1 + waste) and rows <= cols * aspect bound rows by this
    tallest = math.isqrt(math.floor(pes * (1.0 + max_waste) * max_aspect)) + 1
    for rows in range(1, min(wafer_rows, pes, tallest) + 1):
        cols = math.ceil(pes / rows)
        if cols > wafer_cols:
            continue
        aspect = max(rows, cols) / min(rows, cols)
        if aspect > max_aspect or rows * cols > pes * (1.0 + max_waste):
            continue
        found.append(((rows * cols, aspect, rows > cols), (rows, cols)))
    found.sort()
    kept: list[Shape] = []
    for _, (r, c) in found:
        if not any(kr <= r and kc <= c for kr, kc in kept):
            kept.append((r, c))
    return tuple(kept[:limit])


@lru_cache(maxsize=65536)
def shrunk_shapes(
    pes: int,
    wafer_rows: int,
    wafer_cols: int,
    max_shrink: float,
    max_aspect: float = MAX_ASPECT,
    limit: int = 3,
) -> tuple[Shape, ...]:
    """Shapes of fewer PEs than `pes`, down to pes * (1 - max_shrink), for a moldable job (one
    that runs proportionally longer on fewer PEs): first those spanning a whole side of the
    wafer (they tile it: the point of shrinking), then largest, then squarest; at most `limit`,
    none dominated (a shape within another in both sides is dropped)."""
    if max_shrink <= 0 or pes < 2:
        return ()
    low = math.ceil(pes * (1.0 - max_shrink))
    found: list[tuple[tuple[bool, int, float], Shape]] = []
    for rows in range(1, min(wafer_rows, pes) + 1):
        cols = min(wafer_cols, (pes - 1) // rows)
        if cols < 1 or rows * cols < low:
            continue
        aspect = max(rows, cols) / min(rows, cols)
        spans = rows == wafer_rows or cols == wafer_cols
        if aspect <= max_aspect:
            found.append(((not spans, -rows * cols, aspect), (rows, cols)))
    found.sort()
    kept: list[Shape] = []
    for _, (r, c) in found:
        if not any(r <= kr and c <= kc for kr, kc in kept):
            kept.append((r, c))
    return tuple(kept[:limit])


def check_flexible_region(rows: int, cols: int, max_aspect: float) -> str | None:
    """Why a flexible region request is invalid, or None (the message says what to change)."""
    if rows < 1 or cols < 1:
        return f"region {rows}x{cols} is empty; ask for at least 1x1 PEs"
    if max_aspect < 1.0:
        return f"max_aspect {max_aspect} is below 1; use a bound of at least 1 (1 = square only)"
    return None


def free_space_shapes(
    pes: int,
    front: Sequence[Shape],
    max_aspect: float = MAX_ASPECT,
    max_waste: float = MAX_WASTE,
    limit: int = MAX_SHAPES,
) -> tuple[Shape, ...]:
    """Shapes of at least `pes` PEs cut to the free space, for a flexible job none of whose
    usual shapes fits: for each free rectangle h x w of `front` (the Pareto front of the free
    maximal rectangles' sides, `geometry.pareto_front`), the rectangle flush with its height
    (h x ceil(pes / h)) and the one flush with its width (ceil(pes / w) x w), when it fits in
    h x w and keeps the aspect and waste bounds of `flexible_shapes`. A free rectangle that
    such a shape fills leaves no sliver beside it: the shape the free space asks for (an
    11x18 beside a 12x16 in a pinwheel). Every one fits now by construction. Least area first,
    then squarest, then the wider; none dominated; at most `limit`.
    """
    most = pes * (1.0 + max_waste)
    found: set[Shape] = set()
    for h, w in front:
        if h * w < pes:
            continue
        for r, c in ((h, -(-pes // h)), (-(-pes // w), w)):
            if c <= w and r <= h and r * c <= most and max(r, c) <= max_aspect * min(r, c):
                found.add((r, c))
    if not found:
        return ()
    ordered = sorted(found, key=lambda s: (s[0] * s[1], max(s) / min(s), s[0] > s[1], s))
    kept: list[Shape] = []
    for r, c in ordered:
        if not any(kr <= r and kc <= c for kr, kc in kept):
            kept.append((r, c))
    return tuple(kept[:limit])
