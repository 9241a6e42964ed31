"""Free space of one wafer as its set of maximal empty rectangles (MERs).

A rectangle is an int array row ``[r0, c0, r1, c1]`` (half-open: rows r0..r1-1, cols c0..c1-1).
The MER set is kept by the MaxRects rule: occupying a rectangle P splits every MER it touches into
the (up to four) pieces left of, right of, above and below P, and drops pieces contained in
another MER. Every free placement of a shape lies inside some MER, so the set gives complete
recognition: a shape fits the wafer exactly when some MER is at least that tall and that wide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

Rect = tuple[int, int, int, int]
"""(row, col, rows, cols)."""


def _contains(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """[len(inner), len(outer)] bool: inner[i] lies inside outer[j]."""
    a = inner[:, None, :]
    b = outer[None, :, :]
    inside = (b[..., 0] <= a[..., 0]) & (b[..., 1] <= a[..., 1])
    inside &= (b[..., 2] >= a[..., 2]) & (b[..., 3] >= a[..., 3])
    return inside


def _drop_contained(pieces: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Pieces ([k, 4]) not inside another piece or inside one of `others` ([m, 4]).

    Of several equal pieces the first is kept.
    """
    k = len(pieces)
    if k == 0:
        return pieces
    inside = _contains(pieces, pieces)
    equal = inside & inside.T
    # drop i if inside a different piece, or equal to an earlier one (j < i)
    drop = (inside & ~equal) | (equal & np.tri(k, k, -1, dtype=bool))
    dropped = drop.any(axis=1)
    if len(others):
        dropped |= _contains(others, pieces).any(axis=1)
    return pieces[~dropped]


def occupy(mers: np.ndarray, rect: Rect) -> np.ndarray:
    """The MER set ([m, 4]) after `rect` (row, col, rows, cols) becomes occupied."""
    pr0, pc0 = rect[0], rect[1]
    pr1, pc1 = pr0 + rect[2], pc0 + rect[3]
    hit = (mers[:, 0] < pr1) & (mers[:, 2] > pr0) & (mers[:, 1] < pc1) & (mers[:, 3] > pc0)
    if not hit.any():
        return mers
    keep, cut = mers[~hit], mers[hit]
    k = len(cut)
    pieces = np.tile(cut, (4, 1))
    pieces[:k, 2] = pr0  # above the rectangle
    pieces[k : 2 * k, 0] = pr1  # below
    pieces[2 * k : 3 * k, 3] = pc0  # left of it
    pieces[3 * k :, 1] = pc1  # right of it
    pieces = pieces[(pieces[:, 2] > pieces[:, 0]) & (pieces[:, 3] > pieces[:, 1])]
    return np.concatenate([keep, _drop_contained(pieces, keep)])


def _sorted(mers: np.ndarray) -> np.ndarray:
    """MERs in a canonical order (by r0, c0, r1, c1) so that results never depend on history."""
    if len(mers) == 0:
        return mers
    return mers[np.lexsort((mers[:, 3], mers[:, 2], mers[:, 1], mers[:, 0]))]


@lru_cache(maxsize=4096)
def _mers_cached(rows: int, cols: int, rects: tuple[Rect, ...]) -> np.ndarray:
    mers = np.array([[0, 0, rows, cols]], dtype=np.int64)
    for rect in rects:
        mers = occupy(mers, rect)
        if len(mers) == 0:
            break
    mers = _sorted(mers)
    mers.setflags(write=False)
    return mers


def maximal_empty_rects(rows: int, cols: int, rects: Iterable[Rect]) -> np.ndarray:
    """The MERs ([m, 4] int64, read-only) of a rows x cols wafer with `rects` occupied.

    Pure and memoized on (rows, cols, sorted rects): a wafer whose allocations did not change
    since the last cycle costs nothing.
    """
    clipped = tuple(sorted(r for r in rects if r[2] > 0 and r[3] > 0))
    return _mers_cached(rows, cols, clipped)


@dataclass
class FreeSpace:
    """The free space of one wafer while a plan is being built (mutable, local to one plan)."""

    rows: int
    cols: int
    mers: np.ndarray
    free_pes: int

    @classmethod
    def of(cls, rows: int, cols: int, rects: Iterable[Rect]) -> FreeSpace:
        """Free space of a rows x cols wafer with `rects` (row, col, rows, cols) occupied."""
        rect_list = list(rects)
        used = sum(r[2] * r[3] for r in rect_list)
        return cls(rows, cols, maximal_empty_rects(rows, cols, rect_list), rows * cols - used)

    def copy(self) -> FreeSpace:
        """An independent copy (the MER array is never written in place, so it is shared)."""
        return FreeSpace(self.rows, self.cols, self.mers, self.free_pes)

    def fits(self, rows: int, cols: int) -> bool:
        """Whether a rows x cols rectangle fits somewhere in the free space now."""
        m = self.mers
        return bool(len(m)) and bool(((m[:, 2] - m[:, 0] >= rows) & (m[:, 3] - m[:, 1] >= cols)).any())

    def occupy(self, rect: Rect, counts_as_used: bool = True) -> None:
        """Mark `rect` (row, col, rows, cols) occupied; it must lie in free space."""
        self.mers = occupy(self.mers, rect)
        if counts_as_used:
            self.free_pes -= rect[2] * rect[3]

    def largest_free_rect(self) -> tuple[int, int]:
        """(rows, cols) of the largest free rectangle by area, (0, 0) when the wafer is full."""
        m = self.mers
        if len(m) == 0:
            return (0, 0)
        areas = (m[:, 2] - m[:, 0]) * (m[:, 3] - m[:, 1])
        i = int(np.argmax(areas))
        return (int(m[i, 2] - m[i, 0]), int(m[i, 3] - m[i, 1]))

    def fragmentation(self) -> float:
        """1 - largest free rectangle / free PEs, in [0, 1]; 0 when nothing is free."""
        if self.free_pes <= 0:
            return 0.0
        r, c = self.largest_free_rect()
        return max(0.0, 1.0 - (r * c) / self.free_pes)


def shape_frontier(spaces: Iterable[FreeSpace]) -> tuple[list[int], list[int]]:
    """A fast 'fits anywhere?' index over several free spaces.

    Returns (heights ascending, best_width) where best_width[i] is the widest MER among those at
    least heights[i] tall, so (r, c) fits somewhere iff for the first i with heights[i] >= r,
    best_width[i] >= c.
    """
    best: dict[int, int] = {}
    for space in spaces:
        m = space.mers
        for h, w in zip((m[:, 2] - m[:, 0]).tolist(), (m[:, 3] - m[:, 1]).tolist(), strict=True):
            if best.get(h, 0) < w:
                best[h] = w
    heights = sorted(best)
    widths = [best[h] for h in heights]
    for i in range(len(widths) - 2, -1, -1):
        widths[i] = max(widths[i], widths[i + 1])
    return heights, widths
