"""The earliest start time and a concrete rectangle for a blocked job, from running jobs' limits.

On each wafer the running jobs are assumed to end at their time limits. Adding them back in
order of decreasing end time to an empty wafer (insert-only, so the MaxRects update applies)
finds the smallest set of jobs that must end before the shape fits; the start time is the last of
those ends, and the rectangle is chosen in the free space at that time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sam_domain.geometry import Rect
from sam_server.scheduling.geometry import FreeSpace, Mer, fits_in, occupy, pareto_front
from sam_server.scheduling.placement import best_fit_on, first_fit_on
from sam_server.scheduling.shapes import Shape, free_space_shapes


@dataclass(frozen=True)
class TimedRect:
    """A rectangle (row, col, rows, cols) held until `end` (math.inf: no known end)."""

    rect: Rect
    end: float


@dataclass(frozen=True)
class EarliestStart:
    """Where and when a job can start at the earliest: wafer index, top-left, start time."""

    wafer_index: int
    row: int
    col: int
    start: float


def _walk_back(
    wafer_rows: int,
    wafer_cols: int,
    held: Sequence[TimedRect],
    holds: Callable[[tuple[Mer, ...]], bool],
) -> tuple[float, tuple[Mer, ...]]:
    """Add the held rectangles back to an empty wafer, latest end first, while the free space
    still `holds` the job: (the earliest time it does, the free MERs at that time). The empty
    wafer must hold it."""
    order = sorted(held, key=lambda h: (h.end, h.rect))
    mers: tuple[Mer, ...] = ((0, 0, wafer_rows, wafer_cols),)
    start = order[-1].end if order else -math.inf
    for j in range(len(order) - 1, -1, -1):
        after = occupy(mers, order[j].rect)
        if not holds(after):
            return start, mers
        mers = after
        start = order[j - 1].end if j > 0 else -math.inf
    return start, mers


def _earliest_on(
    rows: int, cols: int, wafer_rows: int, wafer_cols: int, held: Sequence[TimedRect]
) -> tuple[float, tuple[Mer, ...]] | None:
    """(start time, MERs at that time) of a rows x cols job on one wafer, or None if never."""
    if rows > wafer_rows or cols > wafer_cols:
        return None
    return _walk_back(wafer_rows, wafer_cols, held, lambda mers: fits_in(mers, rows, cols))


def earliest_time(
    rows: int, cols: int, wafers: Sequence[tuple[int, int, Sequence[TimedRect]] | None]
) -> float:
    """The earliest time a rows x cols job could start on any wafer (inf if never), without
    choosing a rectangle: cheap enough to compare a flexible job's shapes."""
    best = math.inf
    for wafer in wafers:
        if wafer is None:
            continue
        found = _earliest_on(rows, cols, wafer[0], wafer[1], wafer[2])
        if found is not None:
            best = min(best, found[0])
    return best


def _cut_now(pes: int, max_aspect: float, mers: tuple[Mer, ...]) -> tuple[Shape, ...]:
    if not any((m[2] - m[0]) * (m[3] - m[1]) >= pes for m in mers):
        return ()  # (cheap test first: no free rectangle holds the PEs)
    return free_space_shapes(
        pes, pareto_front((m[2] - m[0], m[3] - m[1]) for m in mers), max_aspect
    )


def earliest_cut(
    pes: int, max_aspect: float, wafers: Sequence[tuple[int, int, Sequence[TimedRect]] | None]
) -> tuple[float, Shape] | None:
    """The earliest time some shape of at least `pes` PEs cut to the free space
    (`shapes.free_space_shapes`) fits a wafer, and the first such shape then, or None.

    The same walk as for a fixed shape (`_walk_back`): running jobs are added back latest end
    first until no cut shape is left. Ties on time go to the lower wafer index."""
    best: tuple[float, Shape] | None = None
    for wafer in wafers:
        if wafer is None or not _cut_now(pes, max_aspect, ((0, 0, wafer[0], wafer[1]),)):
            continue
        start, mers = _walk_back(
            wafer[0], wafer[1], wafer[2], lambda m: bool(_cut_now(pes, max_aspect, m))
        )
        if best is None or start < best[0]:
            best = (start, _cut_now(pes, max_aspect, mers)[0])
    return best


def earliest_start(
    rows: int,
    cols: int,
    wafers: Sequence[tuple[int, int, Sequence[TimedRect]] | None],
    now: float,
    placement: str,
) -> EarliestStart | None:
    """Earliest (wafer, rectangle, time >= now) for a rows x cols job, or None if it never fits.

    `wafers` lists (rows, cols, held rectangles) per wafer, None for a wafer that is not usable.
    Ties on time go to the better placement score, then to the lower wafer index.
    """
    best: tuple[tuple[float, ...], EarliestStart] | None = None
    for i, wafer in enumerate(wafers):
        if wafer is None:
            continue
        found = _earliest_on(rows, cols, wafer[0], wafer[1], wafer[2])
        if found is None or math.isinf(found[0]) and found[0] > 0:
            continue
        start = max(now, found[0])
        space = FreeSpace(wafer[0], wafer[1], found[1], 0)
        if placement == "first_fit":
            spot = first_fit_on(space, rows, cols)
            score: tuple[float, ...] = (start, i)
        else:
            fit = best_fit_on(space, rows, cols)
            spot = None if fit is None else (fit[1], fit[2])
            score = (start, *(fit[0] if fit else ()), i)
        if spot is None:
            continue
        if best is None or score < best[0]:
            best = (score, EarliestStart(i, spot[0], spot[1], start))
    return None if best is None else best[1]
