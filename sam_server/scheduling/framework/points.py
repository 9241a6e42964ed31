"""The extension points of a scheduling cycle: each plugin implements one of them.

A cycle (`policy.plan`) runs them in this order:

1. `QueueSort` (one per profile): the waiting jobs' order, and their priorities for `sam explain`.
2. `WalkOrder` (any): jobs moved to the front of the walk over the pending jobs (the oldest,
   the job a stop was made for). Each later plugin's jobs go ahead of the earlier ones'.
3. For each pending job of the walk:
   - `Filter` (any): `admits` may leave the job out of the walk (it neither starts nor blocks
     the jobs behind it: a quota); `wafers` may rule wafers out for it (its arch, a tenant kept
     off a wafer). What one filter rules out, every later step (start, preempt, migrate,
     drain, reserve) respects.
   - `Score` (one): scores the places the job could start now and starts it in the best one.
   - the job is blocked: `PostFilter` (any, in order) may make room for it now (preempt, suspend,
     migrate, drain); the first that does wins.
   - otherwise `Reserve` (one) may give it a rectangle and a start time; jobs behind it start
     only around that reservation (backfill), or, without backfill, not at all.

A plugin is a frozen dataclass whose only field is `args`, its own frozen dataclass of typed
arguments; it keeps nothing between calls. Everything a cycle changes lives in the
`CycleState` it is handed, which never outlives the cycle: the plan stays a pure function of
the snapshot, the time and the profile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from sam_server.scheduling.model import PolicyJob, PriorityBreakdown, Snapshot

if TYPE_CHECKING:
    from sam_server.scheduling.framework.cycle import CycleState

PriorityOf = Callable[[PolicyJob], PriorityBreakdown]
"""A job's priority breakdown at the cycle's time."""


class Plugin:
    """What every plugin has: a `name` (what profiles and settings call it) and `args`."""

    name: ClassVar[str]
    args: object


class QueueSort(Plugin):
    """Orders the waiting jobs; the priorities it gives are the ones `sam explain` shows."""

    def priorities(self, snapshot: Snapshot, now: float, needed: bool) -> PriorityOf | None:
        """The priority of each job (None when the order does not need them and `needed` is
        False: a trace replay explains nothing)."""
        raise NotImplementedError

    def order(self, waiting: list[PolicyJob], priority: PriorityOf | None) -> list[PolicyJob]:
        """`waiting` in queue order."""
        raise NotImplementedError


class WalkOrder(Plugin):
    """Picks pending jobs to walk first, ahead of queue order."""

    def first(self, state: CycleState, pending: list[PolicyJob]) -> list[PolicyJob]:
        """The jobs of `pending` to move to the front, in that order ([]: none)."""
        raise NotImplementedError


class Filter(Plugin):
    """Rules a job out of this cycle, or some wafers out for it."""

    def admits(self, state: CycleState, job: PolicyJob) -> bool:
        """False: the job is skipped this cycle (it does not block the jobs behind it)."""
        return True

    def wafers(self, state: CycleState, job: PolicyJob) -> list[bool] | None:
        """Per wafer of the snapshot, whether `job` may run there; None: on every wafer."""
        return None


class Score(Plugin):
    """Starts a job now in the best-scored place it fits, if any."""

    def start(self, state: CycleState, job: PolicyJob) -> bool:
        """Start `job` now (`state.start`); True if it did."""
        raise NotImplementedError


class PostFilter(Plugin):
    """Makes room now for a job that did not fit (stops or moves running jobs)."""

    def unblock(self, state: CycleState, job: PolicyJob) -> bool:
        """Plan the stops or moves that let `job` start; True if it did (the walk goes on to the
        next job)."""
        raise NotImplementedError


class Reserve(Plugin):
    """Holds a rectangle and a start time for blocked jobs; says whether others backfill."""

    def limit(self) -> int:
        """How many reservations a cycle makes at most (after that, and while a stop is
        planned, blocked jobs go to no post-filter either)."""
        raise NotImplementedError

    def backfill(self) -> bool:
        """Whether jobs behind a blocked one may start (around its reservation)."""
        raise NotImplementedError

    def reserve(self, state: CycleState, job: PolicyJob) -> None:
        """Maybe reserve a rectangle for the blocked `job` (`state.add_reservation`)."""
        raise NotImplementedError


POINTS: tuple[type[Plugin], ...] = (QueueSort, WalkOrder, Filter, Score, PostFilter, Reserve)
"""The extension points, in the order a cycle runs them."""
