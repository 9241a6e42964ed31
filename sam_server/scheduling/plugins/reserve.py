"""`reserve` (Reserve): EASY backfill in two dimensions, for the first `reservations` blocked jobs.

A blocked job that has been eligible the profile's `reserve_after_s` gets a concrete rectangle
and start time from the running jobs' time limits (`reservation.earliest_start`); earlier
reservations count as held until they end, so a later one never overlaps them in space and
time. Behind it, jobs start only outside that rectangle or if they end before it starts; with
`backfill` off nothing starts behind the first blocked job (strict order, FCFS). A flexible job
reserves whichever of its first shapes starts first (with `cut_reserve`, or a shape cut to the
space free then, when that is earlier).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import Reserve
from sam_server.scheduling.model import PolicyJob, Reservation
from sam_server.scheduling.reservation import (
    TimedRect,
    earliest_cut,
    earliest_start,
    earliest_time,
)

MAX_RESERVE_ATTEMPTS = 8
"""Blocked jobs tried for a reservation per cycle (a job whose wafers are all held by jobs with
no known end gets none; the next is tried, but not the whole queue)."""
MAX_RESERVE_SHAPES = 3
"""A flexible job's reservation considers its first few shapes (each costs a time walk)."""


@dataclass(frozen=True)
class ReserveArgs:
    """- reservations: how many blocked jobs get a reservation (1 = EASY, more = conservative
      backfill for the top k); a job only starts now if it ends before, or stays out of, every
      reservation that starts before it would end.
    - backfill: jobs behind a blocked one may start around its reservation (False: strict
      order, nothing overtakes the blocked head of the queue).
    - placement: where in the space free at its start a reservation goes ("best_fit" or
      "first_fit", as `fit`'s).
    - cut_reserve: a flexible job's reservation may take a shape cut to the space free at the
      time it starts, when that is earlier than any of its usual shapes'.
    """

    reservations: int = 2
    backfill: bool = True
    placement: Literal["best_fit", "first_fit"] = "best_fit"
    cut_reserve: bool = True


@dataclass(frozen=True)
class Backfill(Reserve):
    name: ClassVar[str] = "reserve"
    args: ReserveArgs = field(default_factory=ReserveArgs)

    def limit(self) -> int:
        return self.args.reservations

    def backfill(self) -> bool:
        return self.args.backfill

    def reserve(self, state: CycleState, job: PolicyJob) -> None:
        if state.now - job.eligible_at < state.args.reserve_after_s:
            return
        if state.reserve_attempts >= MAX_RESERVE_ATTEMPTS:
            return
        state.reserve_attempts += 1
        wafers_ = state.snapshot.wafers
        extra: list[list[TimedRect]] = [[] for _ in wafers_]
        index = {w.id: i for i, w in enumerate(wafers_)}
        for res in state.reservations:
            rect = (res.row, res.col, res.rows, res.cols)
            extra[index[res.wafer_id]].append(TimedRect(rect, res.start_time + res.time_limit_s))
        mask = state.allowed(job)
        wafers = [
            (w.rows, w.cols, state.ends[i] + extra[i])
            if state.spaces[i] is not None and (mask is None or mask[i])
            else None
            for i, w in enumerate(wafers_)
        ]
        shapes = job.candidate_shapes(state.args.flexible)[:MAX_RESERVE_SHAPES]
        if len(shapes) > 1:  # the shape that can start first (then the smallest), placed below
            times = [
                (max(state.now, earliest_time(r, c, wafers)), r * c, i)
                for i, (r, c) in enumerate(shapes)
            ]
            first = min(times)
            shapes = (shapes[first[2]],)
            if self.args.cut_reserve and job.cut_bounds is not None and first[0] > state.now:
                cut = earliest_cut(*job.cut_bounds, wafers)  # a shape cut to the space then
                if cut is not None and max(state.now, cut[0]) < first[0]:
                    shapes = (cut[1],)
        rows, cols = shapes[0]
        found = earliest_start(rows, cols, wafers, state.now, self.args.placement)
        if found is None:
            return
        wafer = wafers_[found.wafer_index]
        res = Reservation(
            job.id,
            wafer.id,
            found.row,
            found.col,
            rows,
            cols,
            found.start,
            job.limit_in(rows, cols),
        )
        state.add_reservation(res, found.wafer_index)
