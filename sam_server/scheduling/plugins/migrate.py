"""`migrate` (PostFilter): move one running checkpointing job elsewhere so that the first blocked
job starts now.

Only the first blocked job, before any reservation is made, once it has waited the profile's
`reserve_after_s`, and only when it would otherwise wait `min_gain_s` or more (its earliest
start from the running jobs' limits). The moved job restarts on its wafer around the blocked
job's new rectangle, else on another wafer the filters allow it (`migration.choose_migration`);
a move counts against `max_preemptions_per_job` like a stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import PostFilter
from sam_server.scheduling.migration import choose_migration
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.plugins.reserve import MAX_RESERVE_SHAPES
from sam_server.scheduling.reservation import earliest_time


@dataclass(frozen=True)
class MigrateArgs:
    """- min_gain_s: a move is made only if the blocked job would otherwise wait this long."""

    min_gain_s: float = 1800.0


@dataclass(frozen=True)
class Migrate(PostFilter):
    name: ClassVar[str] = "migrate"
    args: MigrateArgs = field(default_factory=MigrateArgs)

    def unblock(self, state: CycleState, job: PolicyJob) -> bool:
        if self.name in state.tried or state.reservations:
            return False
        if state.now - job.eligible_at < state.args.reserve_after_s:
            return False
        state.first_try(self.name)
        wafers = state.held_wafers(job)
        timed = [
            (w.rows, w.cols, state.ends[i]) if wafers[i] is not None else None
            for i, w in enumerate(state.snapshot.wafers)
        ]
        shapes = job.candidate_shapes(state.args.flexible)[:MAX_RESERVE_SHAPES]
        wait = min(earliest_time(r, c, timed) for r, c in shapes) - state.now
        if wait < self.args.min_gain_s:
            return False
        choice = choose_migration(
            job, wafers, state.spaces, state.snapshot.wafers, state.now, state.args, state.allowed
        )
        if choice is None:
            return False
        state.move(job, choice)
        return True
