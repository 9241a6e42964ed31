"""Where a rows x cols job goes: best fit (fragmentation-aware) or first fit over wafers' MERs.

Best fit tries the four corners of every maximal empty rectangle (MER) that can hold the job and
scores each candidate by how much it shrinks the wafer's largest free rectangle (Kim & Yoon's
"potential fragmentation"), then by the area of the MER it sits in (tightest hole first), then
by wafer order, row and column, so the choice is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sam_server.scheduling.geometry import (
    FreeSpace,
    MerArrays,
    fits_in,
    occupy,
    pareto_front,
    table_fits,
    table_front,
    width_table,
)
from sam_server.scheduling.shapes import Shape, free_space_shapes


@dataclass(frozen=True)
class Placement:
    """A chosen rectangle: wafer index in the caller's list, top-left (row, col), its score."""

    wafer_index: int
    row: int
    col: int
    score: tuple[int, ...]


def largest_after(
    found: MerArrays, pos_row: np.ndarray, pos_col: np.ndarray, rows: int, cols: int
) -> np.ndarray:
    """Area of the largest free rectangle after placing rows x cols at each position
    (`pos_row[k]`, `pos_col[k]`) of the free space whose MERs are `found`. Returns [k].

    Every MER of the new free space lies in a piece of an old MER (the MaxRects argument), so the
    maximum piece area over old MERs is exactly the new largest free rectangle. The piece above
    the placement spans rows r0..min(pr0, r1) of a MER, the one below max(pr1, r0)..r1, and so
    on: a MER the placement misses is its own largest piece, with no separate overlap test.
    """
    mers = found.mers
    r0, c0, r1, c1 = (mers[None, :, i] for i in range(4))
    pr0, pc0 = pos_row[:, None], pos_col[:, None]
    pr1, pc1 = pr0 + rows, pc0 + cols
    tall = np.maximum(np.minimum(pr0, r1) - r0, r1 - np.maximum(pr1, r0)) * found.widths
    wide = np.maximum(np.minimum(pc0, c1) - c0, c1 - np.maximum(pc1, c0)) * found.heights
    largest: np.ndarray = np.maximum(np.maximum(tall, wide).max(axis=1), 0)
    return largest


def corner_spots(
    space: FreeSpace, rows: int, cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(row, col, hole, shrink) arrays over the four corners of every MER that holds a
    rows x cols job: its position, the area of the MER (the hole) and how much the largest
    free rectangle shrinks if it goes there; None if it does not fit."""
    if not space.fits(rows, cols):
        return None
    found = space.arrays()
    ok = (found.heights >= rows) & (found.widths >= cols)
    m = found.mers[ok]
    top, left, bottom, right = m[:, 0], m[:, 1], m[:, 2] - rows, m[:, 3] - cols
    pos_row = np.concatenate((top, top, bottom, bottom))
    pos_col = np.concatenate((left, right, left, right))
    area = found.areas[ok]
    hole = np.concatenate((area, area, area, area))
    shrink = found.largest - largest_after(found, pos_row, pos_col, rows, cols)
    return pos_row, pos_col, hole, shrink


def best_fit_on(space: FreeSpace, rows: int, cols: int) -> tuple[tuple[int, ...], int, int] | None:
    """Best (score, row, col) for a rows x cols job on one wafer, or None if it does not fit.

    The candidates are the four corners of every MER that holds the job, each scored by the
    shrink of the largest free rectangle, then the area of the MER (the hole), then row and
    column: the least such triple wins (a corner of several MERs is best with its tightest).
    """
    corners = corner_spots(space, rows, cols)
    if corners is None:
        return None
    pos_row, pos_col, hole, shrink = corners
    place = pos_row * (space.cols + 1) + pos_col  # row, then column
    best = _least(shrink, hole, place, (space.rows + 1) * (space.cols + 1))
    return (int(shrink[best]), int(hole[best])), int(pos_row[best]), int(pos_col[best])


def _least(first: np.ndarray, second: np.ndarray, third: np.ndarray, bound: int) -> int:
    """The index of the least (first, second, third) triple; all three are in [0, bound]."""
    base = bound + 1
    if base**3 < 2**62:  # one int64 key: (first * base + second) * base + third
        return int(np.argmin((first * base + second) * base + third))
    return int(np.lexsort((third, second, first))[0])


def first_fit_on(space: FreeSpace, rows: int, cols: int) -> tuple[int, int] | None:
    """The topmost, then leftmost free position of a rows x cols job on one wafer, or None."""
    corners = [(m[0], m[1]) for m in space.mers if m[2] - m[0] >= rows and m[3] - m[1] >= cols]
    return min(corners) if corners else None


def choose_placement(
    spaces: Sequence[FreeSpace | None],
    rows: int,
    cols: int,
    policy: str,
    beat: tuple[int, ...] | None = None,
) -> Placement | None:
    """Where a rows x cols job goes among `spaces` (None = wafer not usable), or None.

    policy "first_fit": first wafer in order, then topmost-leftmost position.
    policy "best_fit": least shrink of the wafer's largest free rectangle, tightest hole,
    then wafer order, row, col. `beat` (best fit only): a score (shrink, hole) already found
    elsewhere; wafers that cannot do strictly better are not scored.

    Scoring a wafer costs a vectorized pass over its MERs; a wafer whose tightest fitting hole
    is larger than the best hole found with no shrink cannot win, so it is skipped (the shrink
    is never below 0). The choice is the same as scoring every wafer.
    """
    best: Placement | None = None
    for i, space in enumerate(spaces):
        if space is None:
            continue
        if policy == "first_fit":
            spot = first_fit_on(space, rows, cols)
            if spot is not None:
                return Placement(i, spot[0], spot[1], (i,))
            continue
        bound = best.score[:2] if best is not None else beat
        if bound is not None and bound[0] == 0 and _tightest_hole(space, rows, cols) > bound[1]:
            continue
        found = best_fit_on(space, rows, cols)
        if found is None:
            continue
        score = (*found[0], i, found[1], found[2])
        if best is None or score < best.score:
            best = Placement(i, found[1], found[2], score)
    return best


def _tightest_hole(space: FreeSpace, rows: int, cols: int) -> float:
    """The area of the smallest MER that holds rows x cols (inf if none): a lower bound on
    the hole score of any placement on this wafer."""
    if not space.fits(rows, cols):
        return float("inf")
    found = space.arrays()
    return float(found.areas[(found.heights >= rows) & (found.widths >= cols)].min())


class FitIndex:
    """'Can rows x cols fit on any of these wafers?' in O(1); rebuilt after each change.

    The widest free rectangle of each height over all wafers (`width_table`), the maximum of
    the wafers' own cached tables, so a rebuild after a start only recomputes the table of the
    wafer that changed (a vectorized pass over its MERs).
    """

    def __init__(self, spaces: Sequence[FreeSpace | None]) -> None:
        self.widths = width_table(s for s in spaces if s is not None)
        self._cut: dict[tuple[int, float], tuple[Shape, ...]] = {}
        self._front: list[Shape] | None = None

    def fits(self, rows: int, cols: int) -> bool:
        """Whether some wafer has a free rectangle at least rows tall and cols wide."""
        widths = self.widths
        if 0 <= rows < len(widths):  # (asked tens of thousands of times a cycle: inline)
            return cols <= widths[rows]
        return table_fits(widths, rows, cols)

    def cut_shapes(self, pes: int, max_aspect: float) -> tuple[Shape, ...]:
        """Shapes of at least `pes` PEs cut to the free rectangles (`free_space_shapes`),
        memoized per index: the jobs of one size blocked in a cycle share them."""
        if self._front is None:
            self._front = table_front(self.widths)
            self._most = max((h * w for h, w in self._front), default=0)
        if pes > self._most:
            return ()  # (most blocked jobs of a busy cluster: no free rectangle is that large)
        key = (pes, max_aspect)
        found = self._cut.get(key)
        if found is None:
            found = self._cut[key] = free_space_shapes(pes, self._front, max_aspect)
        return found


LOOKAHEAD_NODES = 48
"""Placements tried per candidate by `copies_after` (the search is cut there: bounded cost)."""
LOOKAHEAD_BRANCH = 12
"""Placements tried at each step of the search (flush shapes and tight holes first)."""


def _positions(
    mers: Sequence[tuple[int, int, int, int]], shapes: Sequence[Shape]
) -> list[tuple[int, int, int, int, int]]:
    """(hole area, row, col, rows, cols) of every corner placement of `shapes` in `mers`, once
    each, in the order given by the shapes, then the tightest hole, then row and column."""
    seen: set[tuple[int, int, int, int]] = set()
    out: list[tuple[int, int, int, int, int]] = []
    for rows, cols in shapes:
        here: list[tuple[int, int, int, int, int]] = []
        for r0, c0, r1, c1 in mers:
            if r1 - r0 < rows or c1 - c0 < cols:
                continue
            area = (r1 - r0) * (c1 - c0)
            for row, col in ((r0, c0), (r0, c1 - cols), (r1 - rows, c0), (r1 - rows, c1 - cols)):
                if (row, col, rows, cols) not in seen:
                    seen.add((row, col, rows, cols))
                    here.append((area, row, col, rows, cols))
        here.sort()
        out.extend(here)
    return out


def job_shapes_in(
    mers: Sequence[tuple[int, int, int, int]],
    shapes: Sequence[Shape],
    pes: int,
    max_aspect: float,
) -> list[Shape]:
    """The shapes a flexible job of `pes` PEs may take in the free space `mers`: those cut
    flush to a free rectangle first (`free_space_shapes`: they leave no sliver), then
    `shapes`, each once, only those that fit."""
    front = pareto_front((m[2] - m[0], m[3] - m[1]) for m in mers)
    out = list(free_space_shapes(pes, front, max_aspect))
    out += [s for s in shapes if s not in out and fits_in(mers, *s)]
    return out


def copies_after(
    mers: tuple[tuple[int, int, int, int], ...],
    free_pes: int,
    shapes: Sequence[Shape],
    pes: int,
    max_aspect: float,
    depth: int,
) -> int:
    """How many more jobs like this one (`pes` PEs, `shapes` or cut to the space) the free space
    `mers` can still take at once, up to `depth`: a bounded depth-first search over corner
    placements (at most LOOKAHEAD_NODES placements, LOOKAHEAD_BRANCH per step; deterministic).
    A lower bound of the true count, exact when the search is not cut."""
    budget = [LOOKAHEAD_NODES]
    memo: dict[tuple[tuple[tuple[int, int, int, int], ...], int], int] = {}

    def search(m: tuple[tuple[int, int, int, int], ...], free: int, left: int) -> int:
        left = min(left, free // pes)
        if left <= 0:
            return 0
        key = (tuple(sorted(m)), left)
        if key in memo:
            return memo[key]
        best = 0
        spots = _positions(m, job_shapes_in(m, shapes, pes, max_aspect))
        for _, row, col, rows, cols in spots[:LOOKAHEAD_BRANCH]:
            if budget[0] <= 0:
                break
            budget[0] -= 1
            rect = (row, col, rows, cols)
            best = max(best, 1 + search(occupy(m, rect), free - rows * cols, left - 1))
            if best >= left:
                break
        memo[key] = best
        return best

    return search(mers, free_pes, depth)


def lookahead_placement(
    spaces: Sequence[FreeSpace | None],
    shapes: Sequence[Shape],
    pes: int,
    max_aspect: float,
    depth: int,
    allowed: Callable[[Shape], bool] | None = None,
) -> tuple[Placement, Shape] | None:
    """Where a large flexible job goes so that the most jobs like it still fit after it: the
    placement (a corner of a free rectangle, in one of `shapes` or a shape cut flush to the free
    space) that loses the fewest of the further copies the wafer could take (`copies_after`, up
    to `depth`), then least shrink of the largest free rectangle, least area, tightest hole,
    wafer, row, col. Only wafers whose free PEs hold at most depth + 1 such jobs are searched
    (elsewhere any placement keeps room for them); None when no such wafer takes the job.

    Placing quarter-wafer jobs one by one this way forms the pinwheel (12x16, 11x18, 12x16,
    11x18 on 23x34) that plain best fit misses: the second quarter takes the 11x18 flush beside
    the first, which leaves room for two more.
    """
    best: tuple[tuple[int, ...], Placement, Shape] | None = None
    for i, space in enumerate(spaces):
        if space is None or space.free_pes < pes or space.free_pes >= pes * (depth + 2):
            continue
        mers = space.mers
        options = job_shapes_in(mers, shapes, pes, max_aspect)
        if allowed is not None:
            options = [s for s in options if allowed(s)]
        if not options:
            continue
        before = copies_after(mers, space.free_pes, shapes, pes, max_aspect, depth + 1)
        largest = max((m[2] - m[0]) * (m[3] - m[1]) for m in mers)
        for hole, row, col, rows, cols in _positions(mers, options):
            after = occupy(mers, (row, col, rows, cols))
            free = space.free_pes - rows * cols
            kept = copies_after(after, free, shapes, pes, max_aspect, depth)
            left = max(((m[2] - m[0]) * (m[3] - m[1]) for m in after), default=0)
            key = (before - 1 - kept, largest - left, rows * cols, hole, i, row, col)
            if best is None or key < best[0]:
                best = (key, Placement(i, row, col, key), (rows, cols))
    return None if best is None else (best[1], best[2])
