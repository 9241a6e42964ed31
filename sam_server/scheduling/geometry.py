"""Free space of one wafer as its set of maximal empty rectangles (MERs).

A MER is a tuple ``(r0, c0, r1, c1)`` (half-open: rows r0..r1-1, cols c0..c1-1). The set is kept
by the MaxRects rule: occupying a rectangle P splits every MER it touches into the (up to four)
pieces left of, right of, above and below P, and drops pieces contained in another MER. Every
free placement of a shape lies inside some MER, so the set gives complete recognition: a shape
fits the wafer exactly when some MER is at least that tall and that wide.

Wafers hold tens of jobs, so the sets are small (tens to a few hundred MERs): plain tuples beat
numpy here by an order of magnitude; numpy is used only to score many placements at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain

import numpy as np

from sam_domain.geometry import Rect

Mer = tuple[int, int, int, int]
"""(r0, c0, r1, c1), half-open."""


def occupy(mers: tuple[Mer, ...], rect: Rect) -> tuple[Mer, ...]:
    """The MER set after `rect` (row, col, rows, cols) becomes occupied."""
    pr0, pc0 = rect[0], rect[1]
    pr1, pc1 = pr0 + rect[2], pc0 + rect[3]
    keep: list[Mer] = []
    pieces: set[Mer] = set()
    for m in mers:
        r0, c0, r1, c1 = m
        if r0 >= pr1 or r1 <= pr0 or c0 >= pc1 or c1 <= pc0:
            keep.append(m)
            continue
        if pr0 > r0:
            pieces.add((r0, c0, pr0, c1))
        if r1 > pr1:
            pieces.add((pr1, c0, r1, c1))
        if pc0 > c0:
            pieces.add((r0, c0, r1, pc0))
        if c1 > pc1:
            pieces.add((r0, pc1, r1, c1))
    if not pieces:
        return tuple(keep)
    # An untouched MER can only contain a piece if it borders P on the piece's side (e.g. the
    # piece above P ends at row pr0, and so must any MER containing it without touching P).
    border = [q for q in keep if q[2] == pr0 or q[0] == pr1 or q[3] == pc0 or q[1] == pc1]
    # largest first, so a piece is only ever tested against pieces that could contain it
    ordered = sorted(pieces, key=lambda p: ((p[2] - p[0]) * (p[3] - p[1]), p), reverse=True)
    accepted: list[Mer] = []
    for piece in ordered:
        a0, b0, a1, b1 = piece
        for q0, q1, q2, q3 in accepted:  # (plain loops: a generator per piece costs more)
            if q0 <= a0 and q1 <= b0 and q2 >= a1 and q3 >= b1:
                break
        else:
            for q0, q1, q2, q3 in border:
                if q0 <= a0 and q1 <= b0 and q2 >= a1 and q3 >= b1:
                    break
            else:
                accepted.append(piece)
    return tuple(keep + accepted)


@lru_cache(maxsize=4096)
def _mers_cached(rows: int, cols: int, rects: tuple[Rect, ...]) -> tuple[Mer, ...]:
    mers: tuple[Mer, ...] = ((0, 0, rows, cols),)
    for rect in rects:
        mers = occupy(mers, rect)
        if not mers:
            break
    return tuple(sorted(mers))


def maximal_empty_rects(rows: int, cols: int, rects: Iterable[Rect]) -> tuple[Mer, ...]:
    """The MERs, sorted, of a rows x cols wafer with `rects` (row, col, rows, cols) occupied.

    Pure and memoized on (rows, cols, sorted rects): a wafer whose allocations did not change
    since the last cycle costs nothing.
    """
    clipped = tuple(sorted(r for r in rects if r[2] > 0 and r[3] > 0))
    return _mers_cached(rows, cols, clipped)


def fits_in(mers: Iterable[Mer], rows: int, cols: int) -> bool:
    """Whether some MER is at least rows tall and cols wide."""
    for r0, c0, r1, c1 in mers:
        if r1 - r0 >= rows and c1 - c0 >= cols:
            return True
    return False


@dataclass(frozen=True)
class MerArrays:
    """A MER set as arrays, for vectorized scoring: the MERs [m, 4] (r0, c0, r1, c1), their
    heights, widths and areas [m], and the largest area (0 when there is no MER)."""

    mers: np.ndarray
    heights: np.ndarray
    widths: np.ndarray
    areas: np.ndarray
    largest: int

    @classmethod
    def of(cls, mers: tuple[Mer, ...]) -> MerArrays:
        array = np.fromiter(chain.from_iterable(mers), np.int64, 4 * len(mers)).reshape(-1, 4)
        heights, widths = array[:, 2] - array[:, 0], array[:, 3] - array[:, 1]
        areas = heights * widths
        return cls(array, heights, widths, areas, int(areas.max()) if len(mers) else 0)


@dataclass
class FreeSpace:
    """The free space of one wafer while a plan is being built (mutable, local to one plan)."""

    rows: int
    cols: int
    mers: tuple[Mer, ...]
    free_pes: int
    _arrays: MerArrays | None = field(default=None, repr=False, compare=False)
    _table: np.ndarray | None = field(default=None, repr=False, compare=False)
    _table_list: list[int] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, rows: int, cols: int, rects: Iterable[Rect]) -> FreeSpace:
        """Free space of a rows x cols wafer with `rects` (row, col, rows, cols) occupied."""
        rect_list = list(rects)
        used = sum(r[2] * r[3] for r in rect_list)
        return cls(rows, cols, maximal_empty_rects(rows, cols, rect_list), rows * cols - used)

    def copy(self) -> FreeSpace:
        """An independent copy (MER tuples and the arrays derived from them are immutable,
        so they are shared)."""
        return FreeSpace(
            self.rows,
            self.cols,
            self.mers,
            self.free_pes,
            self._arrays,
            self._table,
            self._table_list,
        )

    def arrays(self) -> MerArrays:
        """The MERs as arrays (cached until the free space changes)."""
        if self._arrays is None:
            self._arrays = MerArrays.of(self.mers)
        return self._arrays

    def array(self) -> np.ndarray:
        """The MERs as an int64 array [m, 4] of (r0, c0, r1, c1), for vectorized scoring."""
        return self.arrays().mers

    def widths(self) -> np.ndarray:
        """widths[h] (h = 0..rows): the widest free rectangle at least h tall, -1 if none.

        Cached until the free space changes; rows x cols fits iff cols <= widths[rows]."""
        if self._table is None:
            found = self.arrays()
            table = np.full(self.rows + 1, -1, dtype=np.int64)
            np.maximum.at(table, found.heights, found.widths)
            self._table = np.maximum.accumulate(table[::-1])[::-1]
        return self._table

    def fits(self, rows: int, cols: int) -> bool:
        """Whether a rows x cols rectangle fits somewhere in the free space now."""
        if self._table_list is None:
            self._table_list = self.widths().tolist()
        return table_fits(self._table_list, rows, cols)

    def occupy(self, rect: Rect, counts_as_used: bool = True) -> None:
        """Mark `rect` (row, col, rows, cols) occupied; it must lie in free space."""
        self.mers = occupy(self.mers, rect)
        self._arrays = self._table = self._table_list = None
        if counts_as_used:
            self.free_pes -= rect[2] * rect[3]

    def largest_free_rect(self) -> tuple[int, int]:
        """(rows, cols) of the largest free rectangle by area, (0, 0) when the wafer is full."""
        if not self.mers:
            return (0, 0)
        m = max(self.mers, key=lambda q: ((q[2] - q[0]) * (q[3] - q[1]), -q[0], -q[1]))
        return (m[2] - m[0], m[3] - m[1])

    def fragmentation(self) -> float:
        """1 - largest free rectangle / free PEs, in [0, 1]; 0 when nothing is free."""
        if self.free_pes <= 0:
            return 0.0
        r, c = self.largest_free_rect()
        return max(0.0, 1.0 - (r * c) / self.free_pes)


def width_table(spaces: Iterable[FreeSpace]) -> list[int]:
    """One widths table (see `FreeSpace.widths`) over several free spaces: a shape fits one of
    them iff it fits this table."""
    tables = [space.widths() for space in spaces]
    if not tables:
        return []
    longest = max(len(t) for t in tables)
    if any(len(t) < longest for t in tables):  # wafers of fewer rows: nothing that tall fits
        tables = [np.pad(t, (0, longest - len(t)), constant_values=-1) for t in tables]
    combined: list[int] = np.max(tables, axis=0).tolist()
    return combined


def table_fits(widths: Sequence[int], rows: int, cols: int) -> bool:
    """Whether a widths table (from `FreeSpace.widths` or `width_table`) holds rows x cols."""
    if rows >= len(widths):
        return False
    return cols <= widths[rows] if rows >= 0 else bool(widths) and cols <= widths[0]


def pareto_front(shapes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (height, width) pairs no other pair dominates: heights ascending, widths descending."""
    front: list[tuple[int, int]] = []
    for h, w in sorted(shapes, key=lambda hw: (-hw[0], -hw[1])):
        if not front or w > front[-1][1]:
            front.append((h, w))
    front.reverse()
    return front


def table_front(widths: Sequence[int]) -> list[tuple[int, int]]:
    """The Pareto front (as `pareto_front`) of the free rectangles a widths table stands for:
    the heights where the widest free rectangle gets narrower one row taller."""
    last = len(widths) - 1
    return [
        (h, widths[h])
        for h in range(1, last + 1)
        if widths[h] > 0 and (h == last or widths[h + 1] < widths[h])
    ]
