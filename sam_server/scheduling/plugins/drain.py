"""`drain` (PostFilter): stop the few running jobs left in the way of a big blocked job so that
it starts now, instead of its wafer idling while they run out.

Where a large job waits for a wafer to drain, the PEs freed before its start idle unless a job
that ends in time backfills them; when the jobs still in its way hold little of its rectangle,
stopping them costs their checkpoint and restart, waiting for them costs the rest of the
rectangle for as long as they have left. One attempt per cycle, for the first blocked job, only
if it needs `min_job` of a wafer and has waited the profile's `reserve_after_s`. The victims
(of its class or lower, each with `min_left_s` left) with the fewest PEs are chosen, under the
`preempt` plugin's protections, which a profile with `drain` must list before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import PostFilter
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.plugins.preempt import Preempt
from sam_server.scheduling.preemption import choose_victims


@dataclass(frozen=True)
class DrainArgs:
    """- share: the most of the big job's PEs the jobs stopped for it may hold; 0 = off.
    - min_job: the least share of a wafer a job needs for a drain stop.
    - min_left_s: a running job with less time left than this is waited for, not stopped.
    """

    share: float = 0.5
    min_job: float = 0.5
    min_left_s: float = 1800.0


@dataclass(frozen=True)
class Drain(PostFilter):
    name: ClassVar[str] = "drain"
    args: DrainArgs = field(default_factory=DrainArgs)

    def unblock(self, state: CycleState, job: PolicyJob) -> bool:
        preempt = state.profile.find(Preempt.name)
        if self.args.share <= 0 or not isinstance(preempt, Preempt):
            return False
        if not state.first_try(self.name):
            return False
        wafer_pes = max(w.rows * w.cols for w in state.snapshot.wafers)
        if job.pes < self.args.min_job * wafer_pes:
            return False
        if state.now - job.eligible_at < state.args.reserve_after_s:
            return False
        rules = preempt.args.rules(state.args, self.args.share, self.args.min_left_s)
        choice = choose_victims(job, state.held_wafers(job), state.now, rules, drain=True)
        if choice is None:
            return False
        if sum(v.pes for v in choice.victims) > self.args.share * job.pes:
            return False
        reason = (
            f"stopped so that job {job.id}, which needs {job.pes} PEs, starts in the drained "
            f"rectangle now (drain_stop_share)"
        )
        state.stop_for(job, choice, [reason] * len(choice.victims))
        return True
