"""`first_after_stop` (WalkOrder): right after a stop, the jobs it was made for go first.

A job preempted less than `min_run_before_preempt_s` ago is back in the queue; the waiting jobs
it was stopped for (`PolicyJob.stopped_for`) go first in the walk, ahead of the protected
oldest, to take the space it freed; if none waits any more, with `behind_factor`, the job
furthest behind. Without it the next in line took that space and the short job suspended a
second job. Nothing moves when nothing was just stopped (one pass over the queue per cycle).
(What the variants gave on the replay matrix is in git: `git log -S _first_after_stop`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.fairshare import bounded_slowdown, slowdown_so_far
from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import WalkOrder
from sam_server.scheduling.model import PolicyJob


@dataclass(frozen=True)
class FirstAfterStopArgs:
    """- behind_factor: when no job a stop was made for waits any more, the waiting job of the
      top class furthest behind goes first if its bounded slowdown so far reaches this (the
      `preempt` plugin's `suspend_factor`); 0 = off.
    - requeue_stopped: a stopped job's wait counts from its stop (as `oldest_first`'s).
    """

    behind_factor: float = 10.0
    requeue_stopped: bool = True


@dataclass(frozen=True)
class FirstAfterStop(WalkOrder):
    name: ClassVar[str] = "first_after_stop"
    args: FirstAfterStopArgs = field(default_factory=FirstAfterStopArgs)

    def first(self, state: CycleState, pending: list[PolicyJob]) -> list[PolicyJob]:
        stopped = [j for j in pending if j.last_preempted_at is not None and state.just_stopped(j)]
        if not stopped:
            return []
        wanted = {j.stopped_for for j in stopped if j.stopped_for is not None}
        named = [j for j in pending if j.id in wanted] if wanted else []
        if named:
            return named
        behind = self._most_behind(state, pending)
        return [] if behind is None else [behind]

    def _most_behind(self, state: CycleState, pending: list[PolicyJob]) -> PolicyJob | None:
        """The waiting job of the top class furthest behind, if its bounded slowdown so far
        reaches `behind_factor`, else None."""
        factor = self.args.behind_factor
        if factor <= 0 or not pending:
            return None
        top = max(CLASS_RANK.get(j.priority_class, 1) for j in pending)
        now, best, worst = state.now, None, factor
        for job in pending:
            if CLASS_RANK.get(job.priority_class, 1) != top:
                continue
            at = job.last_preempted_at
            if self.args.requeue_stopped and at is not None:
                behind = bounded_slowdown(now - at, job.time_limit_s)
            else:
                behind = slowdown_so_far(job, now)
            if behind > worst or (behind == worst and best is None):
                best, worst = job, behind
        return best
