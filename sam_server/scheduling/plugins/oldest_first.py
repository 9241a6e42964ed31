"""`oldest_first` (WalkOrder): the longest-waiting jobs of the top class go first in the walk.

Ordering by priority alone lets a steady stream of short jobs keep a long one waiting; put
first, the oldest jobs start or take the first reservations, so their wait is bounded as under
EASY (whose first blocked job is always the oldest), while the rest go by priority. Only jobs
that have waited the profile's `reserve_after_s` are moved, and not a job stopped less than
`min_run_before_preempt_s` ago.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import WalkOrder
from sam_server.scheduling.model import PolicyJob


@dataclass(frozen=True)
class OldestFirstArgs:
    """- protect_oldest: this many longest-waiting jobs of the top class go first.
    - requeue_stopped: a stopped (preempted) job's seniority counts from its stop, not from
      when it became eligible: it had its turn.
    """

    protect_oldest: int = 1
    requeue_stopped: bool = True


@dataclass(frozen=True)
class OldestFirst(WalkOrder):
    name: ClassVar[str] = "oldest_first"
    args: OldestFirstArgs = field(default_factory=OldestFirstArgs)

    def first(self, state: CycleState, pending: list[PolicyJob]) -> list[PolicyJob]:
        args, now = self.args, state.now
        count = args.protect_oldest
        if count <= 0 or len(pending) < 2:
            return []
        top = max(CLASS_RANK.get(j.priority_class, 1) for j in pending)
        requeue = args.requeue_stopped
        reserve_after = state.args.reserve_after_s

        def since(j: PolicyJob) -> float:
            """Seniority: eligible since, or (`requeue_stopped`) stopped at."""
            at = j.last_preempted_at
            return at if requeue and at is not None else j.eligible_at

        peers = [
            j
            for j in pending
            if CLASS_RANK.get(j.priority_class, 1) == top
            and now - since(j) >= reserve_after
            and (j.last_preempted_at is None or not state.just_stopped(j))
        ]
        if not peers:
            return []
        peers.sort(key=lambda j: (since(j), j.submitted_at, str(j.id)))
        return peers[:count]
