"""Where a rows x cols job goes: best fit (fragmentation-aware) or first fit over wafers' MERs.

Best fit tries the four corners of every maximal empty rectangle (MER) that can hold the job and
scores each candidate by how much it shrinks the wafer's largest free rectangle (Kim & Yoon's
"potential fragmentation"), then by the area of the MER it sits in (tightest hole first), then
by wafer order, row and column, so the choice is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sam_server.scheduling.geometry import (
    FreeSpace,
    MerArrays,
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


def best_fit_on(space: FreeSpace, rows: int, cols: int) -> tuple[tuple[int, ...], int, int] | None:
    """Best (score, row, col) for a rows x cols job on one wafer, or None if it does not fit.

    The candidates are the four corners of every MER that holds the job, each scored by the
    shrink of the largest free rectangle, then the area of the MER (the hole), then row and
    column: the least such triple wins (a corner of several MERs is best with its tightest).
    """
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
