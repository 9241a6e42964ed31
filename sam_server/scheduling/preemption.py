"""Choosing which running jobs to preempt so that a blocked job of a higher class can start.

Protection against thrash, all enforced here:
- only jobs of a strictly lower priority class are victims, so two jobs can never preempt each
  other in turn (the class order is strict and never changes);
- a victim must have run at least `min_run_before_preempt_s` since it (re)started;
- a job preempted `max_preemptions_per_job` times is no longer preemptible;
- jobs marked not preemptible are never victims;
- the fewest victims are taken (greedy, then pruned), youngest first, so little work is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sam_server.scheduling.geometry import FreeSpace, Rect
from sam_server.scheduling.model import CLASS_RANK, Job, PolicyConfig
from sam_server.scheduling.placement import best_fit_on


@dataclass(frozen=True)
class Held:
    """A rectangle held on a wafer, with the running job that holds it (None: not preemptible)."""

    rect: Rect
    job: Job | None


@dataclass(frozen=True)
class PreemptionChoice:
    """Victims to stop on wafer `wafer_index` and the rectangle the preemptor will get."""

    wafer_index: int
    victims: tuple[Job, ...]
    row: int
    col: int


def can_be_victim(victim: Job, preemptor: Job, now: float, config: PolicyConfig) -> bool:
    """Whether `victim` may be preempted for `preemptor` at `now` under the thrash protections."""
    if not victim.preemptible or victim.state != "running" or victim.started_at is None:
        return False
    if CLASS_RANK.get(victim.priority_class, 1) >= CLASS_RANK.get(preemptor.priority_class, 1):
        return False
    if victim.preempt_count >= config.max_preemptions_per_job:
        return False
    return now - victim.started_at >= config.min_run_before_preempt_s


def _fits_without(
    rows: int, cols: int, wafer: tuple[int, int], held: Sequence[Held], gone: set[int]
) -> FreeSpace | None:
    """Free space with the held rectangles at indexes `gone` removed, if the shape fits it."""
    space = FreeSpace.of(wafer[0], wafer[1], (h.rect for i, h in enumerate(held) if i not in gone))
    return space if space.fits(rows, cols) else None


def _victims_on(
    job: Job, wafer: tuple[int, int], held: Sequence[Held], now: float, config: PolicyConfig
) -> tuple[list[int], FreeSpace] | None:
    """Indexes (into `held`) of the fewest victims that let `job` fit on this wafer, or None."""
    if job.rows > wafer[0] or job.cols > wafer[1]:
        return None
    candidates = [
        i for i, h in enumerate(held) if h.job is not None and can_be_victim(h.job, job, now, config)
    ]
    candidates.sort(
        key=lambda i: (CLASS_RANK[held[i].job.priority_class], -held[i].job.started_at, held[i].job.id)  # type: ignore[union-attr]
    )
    free = wafer[0] * wafer[1] - sum(h.rect[2] * h.rect[3] for h in held)
    gone: set[int] = set()
    space = None
    for i in candidates:
        gone.add(i)
        free += held[i].rect[2] * held[i].rect[3]
        if free >= job.pes and (space := _fits_without(job.rows, job.cols, wafer, held, gone)):
            break
    if space is None:
        return None
    for i in sorted(gone, key=candidates.index, reverse=True):  # keep whoever is not needed
        trial = _fits_without(job.rows, job.cols, wafer, held, gone - {i})
        if trial is not None:
            gone.discard(i)
            space = trial
    return sorted(gone, key=candidates.index), space


def choose_victims(
    job: Job,
    wafers: Sequence[tuple[int, int, Sequence[Held]] | None],
    now: float,
    config: PolicyConfig,
) -> PreemptionChoice | None:
    """The cheapest preemption (fewest victims, then fewest PEs) that lets `job` start, or None."""
    best: tuple[tuple, PreemptionChoice] | None = None
    for w, wafer in enumerate(wafers):
        if wafer is None:
            continue
        found = _victims_on(job, (wafer[0], wafer[1]), wafer[2], now, config)
        if found is None:
            continue
        gone, space = found
        fit = best_fit_on(space, job.rows, job.cols)
        if fit is None:
            continue
        victims = tuple(wafer[2][i].job for i in gone)  # type: ignore[misc]
        score = (len(victims), sum(v.pes for v in victims), w)
        if best is None or score < best[0]:
            best = (score, PreemptionChoice(w, victims, fit[1], fit[2]))
    return None if best is None else best[1]
