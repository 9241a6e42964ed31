"""Defragmentation by migration: move one checkpointing job so that a blocked job starts now.

When the head of the queue does not fit anywhere, but would fit on a wafer if one running job
there were elsewhere, and that job fits elsewhere (on the same wafer around the head's new
rectangle, or on another wafer), the job is moved: checkpoint, release, restart elsewhere from
the checkpoint. The live system does this through the preemption path (the move is a `Preempt`
whose `to` names the target; the job requeues and restarts from its checkpoint); `sam sim`
restarts it at the target at once and charges the cost.

Bounds, as for preemption: only preemptible (checkpointing) jobs move; a job moves only after
it has run `min_run_before_preempt_s` since it (re)started or was last moved; moves count in
`preempt_count`, bounded by `max_preemptions_per_job`; a move is made only when the blocked
job would otherwise wait at least `migrate_min_gain_s`; at most `MAX_TRIES` candidates are
tried per cycle (each costs one free-space computation), smallest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sam_server.scheduling.geometry import FreeSpace, maximal_empty_rects
from sam_server.scheduling.model import PolicyJob, PolicyWafer, arch_matches
from sam_server.scheduling.placement import best_fit_on
from sam_server.scheduling.preemption import Held

MAX_TRIES = 8
"""Candidates (running jobs) tried per cycle."""
MAX_SHAPES = 3
"""Shapes of the blocked job tried per candidate."""


class MoveRules(Protocol):
    """What a move reads of the profile's `CycleArgs`."""

    @property
    def flexible(self) -> bool: ...
    @property
    def max_preemptions_per_job(self) -> int: ...
    @property
    def min_run_before_preempt_s(self) -> float: ...


Allowed = Callable[[PolicyJob], "list[bool] | None"]
"""Per wafer, whether a job may run there (the profile's filters); None: everywhere."""


@dataclass(frozen=True)
class MigrationChoice:
    """Move `job` (running on wafer `from_index`) to (to_index, row, col, rows, cols); the
    blocked job then starts at (wafer_index, row, col) in shape rows x cols."""

    job: PolicyJob
    from_index: int
    to_index: int
    to_rect: tuple[int, int, int, int]
    wafer_index: int
    row: int
    col: int
    rows: int
    cols: int


def can_migrate(job: PolicyJob, now: float, config: MoveRules) -> bool:
    """Whether a running `job` may be moved now (checkpointing, ran long enough, under the
    per-job bound shared with preemption)."""
    if not job.preemptible or job.state != "running" or job.started_at is None:
        return False
    if job.preempt_count >= config.max_preemptions_per_job:
        return False
    since = max(job.started_at, job.last_preempted_at or job.started_at)
    return now - since >= config.min_run_before_preempt_s


def choose_migration(
    blocked: PolicyJob,
    wafers: Sequence[tuple[int, int, Sequence[Held]] | None],
    spaces: Sequence[FreeSpace | None],
    all_wafers: Sequence[PolicyWafer],
    now: float,
    config: MoveRules,
    allowed: Allowed | None = None,
) -> MigrationChoice | None:
    """One move that lets `blocked` start now, or None.

    `wafers`: (rows, cols, held rectangles) per wafer, None where `blocked` may not go;
    `spaces`: the free space of every wafer now (None: not usable), for the moved job's target;
    `all_wafers`: the snapshot's wafers (the moved job stays on its arch); `allowed`: the
    wafers the profile's filters let the moved job go to.
    Candidates are the movable jobs on wafers where free PEs plus theirs cover `blocked`,
    smallest first (least work to checkpoint and restart), then by id.
    """
    candidates: list[tuple[int, int, str, int]] = []  # (pes, wafer, job id, held index)
    for w, wafer in enumerate(wafers):
        space = spaces[w]
        if wafer is None or space is None:
            continue
        for i, h in enumerate(wafer[2]):
            if h.job is None or not can_migrate(h.job, now, config):
                continue
            if space.free_pes + h.rect[2] * h.rect[3] >= blocked.pes:
                candidates.append((h.rect[2] * h.rect[3], w, str(h.job.id), i))
    candidates.sort()
    shapes = blocked.candidate_shapes(config.flexible)[:MAX_SHAPES]
    for _, w, _, i in candidates[:MAX_TRIES]:
        wafer = wafers[w]
        assert wafer is not None
        moved = wafer[2][i]
        assert moved.job is not None
        others = [h.rect for k, h in enumerate(wafer[2]) if k != i]
        free = wafer[0] * wafer[1] - sum(r[2] * r[3] for r in others)
        opened = FreeSpace(
            wafer[0], wafer[1], maximal_empty_rects(wafer[0], wafer[1], others), free
        )
        for rows, cols in shapes:
            fit = best_fit_on(opened, rows, cols)
            if fit is None:
                continue
            after = opened.copy()
            after.occupy((fit[1], fit[2], rows, cols))
            target = _target(moved, w, after, spaces, all_wafers, config, allowed)
            if target is not None:
                return MigrationChoice(
                    moved.job, w, target[0], target[1], w, fit[1], fit[2], rows, cols
                )
    return None


def _target(
    moved: Held,
    home: int,
    after: FreeSpace,
    spaces: Sequence[FreeSpace | None],
    wafers: Sequence[PolicyWafer],
    config: MoveRules,
    allowed: Allowed | None = None,
) -> tuple[int, tuple[int, int, int, int]] | None:
    """Where the moved job restarts: its wafer (around the blocked job's new rectangle) first,
    then the other wafers of its arch in order; in its current shape, else one of the other
    shapes it accepts."""
    assert moved.job is not None
    shapes = moved.job.candidate_shapes(config.flexible)[:MAX_SHAPES]
    mask = allowed(moved.job) if allowed is not None else None
    for w, space in [(home, after), *((k, s) for k, s in enumerate(spaces) if k != home)]:
        if space is None or not arch_matches(wafers[w], moved.job):
            continue
        if mask is not None and not mask[w]:
            continue
        for r, c in shapes:
            fit = best_fit_on(space, r, c)
            if fit is not None:
                return w, (fit[1], fit[2], r, c)
    return None
