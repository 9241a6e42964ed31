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

from sam_server.scheduling.geometry import FreeSpace, front_fits, shape_frontier
from sam_server.scheduling.shapes import Shape, free_space_shapes


@dataclass(frozen=True)
class Placement:
    """A chosen rectangle: wafer index in the caller's list, top-left (row, col), its score."""

    wafer_index: int
    row: int
    col: int
    score: tuple[int, ...]


def _candidates(mers: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Corner positions ([k, 2]: row, col) of fitting MERs and the area of the MER each is in."""
    ok = (mers[:, 2] - mers[:, 0] >= rows) & (mers[:, 3] - mers[:, 1] >= cols)
    m = mers[ok]
    if len(m) == 0:
        return np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.int64)
    top, left, bottom, right = m[:, 0], m[:, 1], m[:, 2] - rows, m[:, 3] - cols
    pos = np.empty((4 * len(m), 2), dtype=np.int64)
    pos[:, 0] = np.concatenate([top, top, bottom, bottom])
    pos[:, 1] = np.concatenate([left, right, left, right])
    area = np.tile((m[:, 2] - m[:, 0]) * (m[:, 3] - m[:, 1]), 4)
    return pos, area


def largest_after(mers: np.ndarray, pos: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Area of the largest free rectangle after placing rows x cols at each of `pos` ([k, 2]).

    Every MER of the new free space lies in a piece of an old MER (the MaxRects argument), so the
    maximum piece area over old MERs is exactly the new largest free rectangle. Returns [k].
    """
    r0, c0, r1, c1 = (mers[None, :, i] for i in range(4))
    pr0, pc0 = pos[:, 0:1], pos[:, 1:2]
    pr1, pc1 = pr0 + rows, pc0 + cols
    h, w = r1 - r0, c1 - c0
    hit = (r0 < pr1) & (r1 > pr0) & (c0 < pc1) & (c1 > pc0)
    top = np.maximum(pr0 - r0, 0) * w
    bottom = np.maximum(r1 - pr1, 0) * w
    left = np.maximum(pc0 - c0, 0) * h
    right = np.maximum(c1 - pc1, 0) * h
    piece = np.maximum(np.maximum(top, bottom), np.maximum(left, right))
    area = np.where(hit, piece, h * w)
    largest: np.ndarray = area.max(axis=1)
    return largest


def best_fit_on(space: FreeSpace, rows: int, cols: int) -> tuple[tuple[int, ...], int, int] | None:
    """Best (score, row, col) for a rows x cols job on one wafer, or None if it does not fit."""
    if not space.fits(rows, cols):
        return None
    mers = space.array()
    pos, hole = _candidates(mers, rows, cols)
    tight_first = np.argsort(hole, kind="stable")
    pos, hole = pos[tight_first], hole[tight_first]
    key = pos[:, 0] * (space.cols + 1) + pos[:, 1]
    _, idx = np.unique(key, return_index=True)  # sorted by (row, col); first = tightest hole
    pos, hole = pos[idx], hole[idx]
    before = int(((mers[:, 2] - mers[:, 0]) * (mers[:, 3] - mers[:, 1])).max())
    shrink = before - largest_after(mers, pos, rows, cols)
    # np.unique sorted pos by (row, col), so lexsort keeps that as the last tie-break.
    best = int(np.lexsort((hole, shrink))[0])
    return (int(shrink[best]), int(hole[best])), int(pos[best, 0]), int(pos[best, 1])


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
    mers = space.array()
    h, w = mers[:, 2] - mers[:, 0], mers[:, 3] - mers[:, 1]
    return float((h * w)[(h >= rows) & (w >= cols)].min())


class FitIndex:
    """'Can rows x cols fit on any of these wafers?' in O(log m); rebuilt after each change.

    One Pareto front merged from the wafers' own cached fronts, so a rebuild after a start
    only recomputes the front of the wafer that changed.
    """

    def __init__(self, spaces: Sequence[FreeSpace | None]) -> None:
        self.front = shape_frontier(s for s in spaces if s is not None)
        self._cut: dict[tuple[int, float], tuple[Shape, ...]] = {}
        self._most = max((h * w for h, w in self.front), default=0)  # largest free rectangle

    def fits(self, rows: int, cols: int) -> bool:
        """Whether some wafer has a free rectangle at least rows tall and cols wide."""
        return front_fits(self.front, rows, cols)

    def cut_shapes(self, pes: int, max_aspect: float) -> tuple[Shape, ...]:
        """Shapes of at least `pes` PEs cut to the free rectangles (`free_space_shapes`),
        memoized per index: the jobs of one size blocked in a cycle share them."""
        if pes > self._most:
            return ()  # (most blocked jobs of a busy cluster: no free rectangle is that large)
        key = (pes, max_aspect)
        found = self._cut.get(key)
        if found is None:
            found = self._cut[key] = free_space_shapes(pes, self.front, max_aspect)
        return found
