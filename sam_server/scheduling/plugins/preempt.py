"""`preempt` (PostFilter): stop lower-class running jobs, or suspend one of the blocked job's own
class, so that the first blocked job that may preempt starts now.

One attempt per cycle: the first blocked job whose class is above the lowest class running (or,
with `suspend_factor`, whose bounded slowdown so far reaches it), since checking every blocked
job would cost O(queue x held). The victims and their protections are `preemption`'s: fewest
victims, youngest first; each has run `min_run_before_preempt_s` and been stopped fewer than
`max_preemptions_per_job` times (the profile's `CycleArgs`).

Selective suspension is the same-class case: a short job that has waited long may stop a
running job of its class whose slowdown so far is `suspend_factor` times lower and which has
more time left than the waiting job's whole limit (checkpoint, back to pending).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.fairshare import slowdown_so_far
from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import PostFilter
from sam_server.scheduling.framework.profile import CycleArgs
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.preemption import StopRules, choose_victims


@dataclass(frozen=True)
class PreemptArgs:
    """- suspend_factor: selective suspension: a waiting job whose bounded slowdown so far is
      this multiple of a running job's of its class may stop it; 0 = off (only a higher class
      preempts).
    - suspend_max: a job suspended this many times already is suspended again only past
      `suspend_again_factor`'s higher bar (and a drain stop never takes it); 0 = only
      `max_preemptions_per_job` bounds it.
    - suspend_again_factor: that higher bar, as a multiple of the usual one; 0 = never again.
    """

    suspend_factor: float = 10.0
    suspend_max: int = 1
    suspend_again_factor: float = 10.0

    def rules(
        self, cycle: CycleArgs, drain_share: float = 0.0, drain_left_s: float = 0.0
    ) -> StopRules:
        """The protections a stop is made under (with a drain stop's, for `drain`)."""
        return StopRules(
            cycle.min_run_before_preempt_s,
            cycle.max_preemptions_per_job,
            self.suspend_factor,
            self.suspend_max,
            self.suspend_again_factor,
            drain_share,
            drain_left_s,
        )


@dataclass(frozen=True)
class Preempt(PostFilter):
    name: ClassVar[str] = "preempt"
    args: PreemptArgs = field(default_factory=PreemptArgs)

    def unblock(self, state: CycleState, job: PolicyJob) -> bool:
        if not self._may(state, job):
            return False
        rules = self.args.rules(state.args)
        choice = choose_victims(job, state.held_wafers(job), state.now, rules)
        if choice is None:
            return False
        reasons = []
        for victim in choice.victims:
            reason = f"preempted for {job.priority_class}-class job {job.id}"
            if victim.priority_class == job.priority_class:  # selective suspension
                mine = slowdown_so_far(victim, state.now)
                theirs = slowdown_so_far(job, state.now)
                reason = (
                    f"suspended for job {job.id} of its class: its slowdown so far is "
                    f"{theirs:.1f}, this job's {mine:.1f} (suspend_factor)"
                )
            reasons.append(reason)
        state.stop_for(job, choice, reasons)
        return True

    def _may(self, state: CycleState, job: PolicyJob) -> bool:
        """Whether `job` gets this cycle's one preemption attempt."""
        if self.name in state.tried:
            return False
        if CLASS_RANK.get(job.priority_class, 1) <= state.lowest_running_rank:
            factor = self.args.suspend_factor
            if factor <= 0 or slowdown_so_far(job, state.now) < factor:
                return False  # (no running job's slowdown is below 1: none could be suspended)
        return state.first_try(self.name)
