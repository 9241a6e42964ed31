"""`fit` (Score): start a job now in the best-scored place one of its shapes fits.

The free rectangles are scored by `placement.choose_placement` (best fit: fragmentation-aware
over the maximal empty rectangles; first fit: the first that fits), around the reservations
made so far (a job that would still run when a reservation starts stays out of its rectangle).
A flexible job's first few shapes are all scored and the best placement wins (ties: the asked
shape). When none fits, `cut_to_fit` tries shapes cut to the free rectangles; `lookahead`
places a mid-sized job where the most jobs of its size still fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import Score
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.placement import (
    FitIndex,
    Placement,
    choose_placement,
    lookahead_placement,
)

LOOKAHEAD_MAX_SHARE = 3
"""Look-ahead placement is for jobs of at most 1/LOOKAHEAD_MAX_SHARE of a wafer (larger ones:
only with `lookahead_pairs`, while a job of about their size waits)."""
LIKE_SIZE = (0.8, 1.25)
"""A waiting job of this range of a starting job's PEs is one "like it" (`_lookahead`)."""
MAX_START_SHAPES = 3
"""A flexible job is placed in the best of its first few shapes that fit (each placement scores
every wafer's free rectangles; the first shapes are the least wasteful)."""


@dataclass(frozen=True)
class FitArgs:
    """- placement: "best_fit" (fragmentation-aware over maximal empty rectangles) or
      "first_fit".
    - cut_to_fit: a flexible job none of whose usual shapes fits now may start in a shape cut
      to a free maximal rectangle (flush with its height or width, at least the job's PEs,
      within the aspect and waste bounds: `shapes.free_space_shapes`). Needs the profile's
      `flexible`.
    - lookahead: look-ahead placement (0 = off): a flexible job of at most a third of a wafer
      that lands on a wafer with room for at most `lookahead` + 1 jobs like it, while no smaller
      job waits, goes where the most further jobs of its size still fit (up to `lookahead` of
      them: `placement.lookahead_placement`).
    - lookahead_pairs: look-ahead placement also for a job of more than a third of a wafer while
      another job of about its size (0.8-1.25x its PEs) waits and no smaller one does: it goes
      where that job still fits beside it (23x17 + 23x17 on 23x34, not one in 16x24 and the
      other waiting it out).
    """

    placement: Literal["best_fit", "first_fit"] = "best_fit"
    cut_to_fit: bool = True
    lookahead: int = 2
    lookahead_pairs: bool = True


@dataclass(frozen=True)
class Fit(Score):
    name: ClassVar[str] = "fit"
    args: FitArgs = field(default_factory=FitArgs)

    def start(self, state: CycleState, job: PolicyJob) -> bool:
        args, flexible = self.args, state.args.flexible
        shapes = job.candidate_shapes(flexible)
        longest = max(job.limit_in(r, c) for r, c in shapes) if job.work_pes else job.time_limit_s
        views, index = state.view_for(state.now + longest)
        views = state.for_job(job, views)
        best = self._best(state, job, shapes, views, index)
        if best is None and args.cut_to_fit and flexible and job.cut_bounds is not None:
            cut = index.cut_shapes(*job.cut_bounds)
            best = self._best(state, job, cut, views, index) if cut else None
        if best is None:
            return False
        if args.lookahead > 0 and flexible and job.cut_bounds is not None:
            best = self._lookahead(state, job, shapes, views, best)
        spot, (rows, cols) = best
        shaped = job
        if (rows, cols) != (job.rows, job.cols):
            shaped = replace(job, rows=rows, cols=cols, time_limit_s=job.limit_in(rows, cols))
        state.start(shaped, spot.wafer_index, spot.row, spot.col)
        return True

    def _best(
        self,
        state: CycleState,
        job: PolicyJob,
        shapes: Sequence[tuple[int, int]],
        views: list[FreeSpace | None],
        index: FitIndex,
    ) -> tuple[Placement, tuple[int, int]] | None:
        """The best placement among the first few of `shapes` that fit, and its shape."""
        best: tuple[tuple[tuple[int, ...], int], Placement, tuple[int, int]] | None = None
        tried = 0
        for rows, cols in shapes:
            if tried >= MAX_START_SHAPES:
                break
            if best is not None and rows * cols < job.work_pes:
                break  # a moldable job's shrunk shapes (last) only when no full shape fits
            if not index.fits(rows, cols):
                continue
            if not within_quota(state, job, rows * cols):
                continue
            tried += 1
            beat = best[0][0][:2] if best is not None else None
            spot = choose_placement(views, rows, cols, self.args.placement, beat)
            if spot is None:
                continue
            key = (spot.score, rows * cols)
            if best is None or key < best[0]:
                best = (key, spot, (rows, cols))
        return None if best is None else (best[1], best[2])

    def _lookahead(
        self,
        state: CycleState,
        job: PolicyJob,
        shapes: Sequence[tuple[int, int]],
        views: list[FreeSpace | None],
        best: tuple[Placement, tuple[int, int]],
    ) -> tuple[Placement, tuple[int, int]]:
        """`best`, or when it lands on a wafer with room for only a few more jobs like this one,
        the placement that keeps room for the most of them.

        Not for a job of more than a third of a wafer (two halves packed flush leave no PE for
        the small jobs EASY still runs beside them) unless (`lookahead_pairs`) a job like it
        waits now, which then starts beside it at once; nor while a smaller job waits (the room
        kept is then the small jobs' to take, not the next large job's)."""
        pes, aspect = job.cut_bounds or (job.pes, 1.0)
        depth = self.args.lookahead
        space = views[best[0].wafer_index]
        if space is None or space.free_pes >= pes * (depth + 2):
            return best  # room for more than `depth` + 1 such jobs: any placement keeps it
        if pes * LOOKAHEAD_MAX_SHARE > space.rows * space.cols:
            low, high = math.ceil(pes * LIKE_SIZE[0]), math.floor(pes * LIKE_SIZE[1])
            if not self.args.lookahead_pairs or not state.waiting_sized(low, high, job.id):
                return best  # (no job like it waits to take the room kept)
        if state.waiting_sized(0, pes - 1):
            return best  # a smaller job waits

        def allowed(shape: tuple[int, int]) -> bool:
            area = shape[0] * shape[1]
            return area >= job.work_pes and within_quota(state, job, area)

        found = lookahead_placement(views, shapes, pes, aspect, depth, allowed)
        return best if found is None else found


def within_quota(state: CycleState, job: PolicyJob, area: int) -> bool:
    """Whether `job` may hold `area` PEs: a shape larger than it asked for must not take its
    tenant over max_pes."""
    return area <= job.pes or state.ledger.allows(job, area)
