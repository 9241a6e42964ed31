"""Kernel sizing and placement inside the job's rectangle.

Sizing: each kernel needs at least `min_area` PEs to hold its memory; beyond that, area goes to
kernels in proportion to their FLOPs (binary search on the pipeline's slowest-kernel time T*:
a_i = max(min_area_i, ceil(F_i / T*)), the smallest T* with sum(a_i) <= area), so the
pipeline is balanced. Placement: a slicing floorplan that keeps the kernels' execution order
(a chain) adjacent: the ordered list is cut in two, the rectangle is cut across its longer side
in the same proportion, recursively. Every PE of the region belongs to exactly one kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

Rect = tuple[int, int, int, int]  # (row, col, height, width), region-relative
# (j, first rect, second rect): kernels ids[:j] go to the first part, the rest to the second
Cut = tuple[int, Rect, Rect]
# strips of a given width a group of kernels needs: (group, per-kernel minimum areas, width)
StripsNeeded = Callable[[list[int], list[int], int], int]


class PlacementFailed(Exception):
    """The kernels' minimum areas cannot be packed into the rectangle."""


@dataclass(frozen=True)
class SizingInput:
    """One kernel as sizing sees it: FLOPs and the smallest area that holds its memory."""

    flops: int
    min_area: int


def balance_areas(kernels: list[SizingInput], area: int) -> list[int]:
    """Target areas (PE counts) balancing FLOPs per PE; raises PlacementFailed if mins exceed area."""
    mins = [max(1, k.min_area) for k in kernels]
    if sum(mins) > area:
        raise PlacementFailed(f"kernels need {sum(mins)} PEs, the region has {area}")
    flops = [max(1, k.flops) for k in kernels]

    def areas_for(t: float) -> list[int]:
        return [max(m, math.ceil(f / t)) for m, f in zip(mins, flops, strict=False)]

    lo, hi = 1e-9, float(max(flops))
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if sum(areas_for(mid)) <= area:
            hi = mid
        else:
            lo = mid
    return areas_for(hi)


def size_and_place(
    flops: list[int], mins: list[int], rows: int, cols: int, do_placement: bool = True
) -> tuple[list[int], list[Rect] | None]:
    """Balanced areas and their rectangles (None without placement).

    Rectangles come in whole strips, so a kernel may come out below its minimum or a cut may
    find no room; then the minimums grow (the short kernels', or all by ~15 %) and the layout is
    redone (or the area budget shrinks to leave slack), a few times at most.
    """
    mins = list(mins)
    budget = rows * cols
    for _ in range(16):
        areas = balance_areas([SizingInput(f, m) for f, m in zip(flops, mins, strict=True)], budget)
        if not do_placement:
            return areas, None
        try:
            rects = place(areas, mins, rows, cols)
        except PlacementFailed:
            # Order-keeping cuts cannot fill every PE exactly: aim lower and let the leaves
            # absorb the slack.
            if budget <= sum(mins):
                break
            budget = max(sum(mins), int(budget * 0.85))
            continue
        short = [i for i, r in enumerate(rects) if r[2] * r[3] < mins[i]]
        if not short:
            return areas, rects
        for i in short:
            mins[i] = math.ceil(mins[i] * 1.1) + 1
        if sum(mins) > rows * cols:
            break
    raise PlacementFailed(
        f"kernels could not be packed into {rows}x{cols} with their minimum areas"
    )


def place(weights: list[int], mins: list[int], rows: int, cols: int) -> list[Rect]:
    """Disjoint rectangles covering rows x cols, one per kernel, in chain order."""
    rects: list[Rect] = [(0, 0, 0, 0)] * len(weights)
    _place(list(range(len(weights))), weights, mins, (0, 0, rows, cols), rects)
    return rects


def _place(
    ids: list[int], weights: list[int], mins: list[int], rect: Rect, out: list[Rect]
) -> None:
    if len(ids) == 1:
        out[ids[0]] = rect
        return
    cut = _best_cut(ids, weights, mins, rect)
    if cut is None:
        raise PlacementFailed(f"cannot pack {len(ids)} kernels into a {rect[2]}x{rect[3]} block")
    j, first, second = cut
    _place(ids[:j], weights, mins, first, out)
    _place(ids[j:], weights, mins, second, out)


def _best_cut(ids: list[int], weights: list[int], mins: list[int], rect: Rect) -> Cut | None:
    """(j, first rect, second rect): kernels ids[:j] go to the first part. Prefers cuts whose
    parts can hold their kernels as strips (`_strips_needed`); falls back to total area."""
    for need in (_strips_needed, _strips_by_area):
        cut = _cut_with(ids, weights, mins, rect, need)
        if cut is not None:
            return cut
    return None


def _strips_needed(group: list[int], mins: list[int], side: int) -> int:
    """Strips of width `side` that surely hold the group: kernels smaller than a strip share
    strips, bigger ones take whole strips of their own."""
    small = sum(mins[i] for i in group if mins[i] < side)
    big = sum(math.ceil(mins[i] / side) for i in group if mins[i] >= side)
    return max(1, math.ceil(small / side) + big, math.ceil(len(group) / side))


def _strips_by_area(group: list[int], mins: list[int], side: int) -> int:
    return max(1, math.ceil(sum(mins[i] for i in group) / side), math.ceil(len(group) / side))


def _cut_with(
    ids: list[int], weights: list[int], mins: list[int], rect: Rect, need: StripsNeeded
) -> Cut | None:
    r, c, h, w = rect
    total = sum(weights[i] for i in ids)
    best: tuple[tuple[float, float], int, Rect, Rect] | None = None
    for along_rows in ((h >= w), (h < w)):
        length, side = (h, w) if along_rows else (w, h)
        if length < 2:
            continue
        prefix_w = 0
        for j in range(1, len(ids)):
            prefix_w += weights[ids[j - 1]]
            frac = prefix_w / total
            lo = need(ids[:j], mins, side)
            hi = length - need(ids[j:], mins, side)
            if lo > hi:
                continue
            k = min(hi, max(lo, round(length * frac)))
            cost = (abs(k / length - frac), abs(j - len(ids) / 2))
            if best is None or cost < best[0]:
                first = (r, c, k, w) if along_rows else (r, c, h, k)
                second = (r + k, c, h - k, w) if along_rows else (r, c + k, h, w - k)
                best = (cost, j, first, second)
        if best is not None:
            break
    return None if best is None else best[1:]
