"""Choosing which running jobs to preempt so that a blocked job of a higher class can start.

Protection against thrash, all enforced here:
- only jobs of a strictly lower priority class are victims, so two jobs can never preempt each
  other in turn (the class order is strict and never changes); with `suspend_factor`, also a
  job of the same class with more time left than the preemptor's limit and a slowdown so far
  `suspend_factor` times lower (a short job that waited long stops a long one; never the
  reverse, as the preemptor is the shorter);
- a victim must have run at least `min_run_before_preempt_s` since it (re)started;
- a job preempted `max_preemptions_per_job` times is no longer preemptible; one suspended
  `suspend_max` times only for a preemptor `suspend_again_factor` times further behind;
- jobs marked not preemptible are never victims;
- the fewest victims are taken (greedy, then pruned), youngest first, so little work is lost;
  for a drain stop (`drain`, see `plugins.drain`), the fewest PEs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sam_domain.geometry import Rect
from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.fairshare import slowdown_so_far
from sam_server.scheduling.geometry import (
    FreeSpace,
    Mer,
    fits_in,
    maximal_empty_rects,
    occupy,
)
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.placement import best_fit_on


@dataclass(frozen=True)
class Held:
    """A rectangle held on a wafer, with the running job that holds it (None: not preemptible)."""

    rect: Rect
    job: PolicyJob | None


@dataclass(frozen=True)
class StopRules:
    """The protections a stop is made under (the `preempt` and `drain` plugins' arguments and
    the profile's `CycleArgs`); 0 turns a rule of suspension or drain off."""

    min_run_before_preempt_s: float
    max_preemptions_per_job: int
    suspend_factor: float = 0.0
    suspend_max: int = 0
    suspend_again_factor: float = 0.0
    drain_stop_share: float = 0.0
    drain_stop_min_left_s: float = 0.0


@dataclass(frozen=True)
class PreemptionChoice:
    """Victims to stop on wafer `wafer_index` and the rectangle the preemptor will get."""

    wafer_index: int
    victims: tuple[PolicyJob, ...]
    row: int
    col: int


def may_suspend(victim: PolicyJob, preemptor: PolicyJob, now: float, config: StopRules) -> bool:
    """Selective suspension (`suspend_factor`): a job of the same class may be stopped for a
    shorter one whose slowdown so far is `suspend_factor` times the victim's; only a job with
    more time left than the preemptor's whole limit (a short job never waits for a long one).
    A job stopped
    `suspend_max` times already is stopped again only for a preemptor `suspend_again_factor`
    times further behind (0: never)."""
    if config.suspend_factor <= 0 or victim.priority_class != preemptor.priority_class:
        return False
    if victim.started_at is None:
        return False
    again = bool(config.suspend_max) and victim.preempt_count >= config.suspend_max
    if again and config.suspend_again_factor <= 0:
        return False
    left = victim.started_at + victim.time_limit_s - now
    if preemptor.time_limit_s > left:
        return False
    bar = config.suspend_factor * slowdown_so_far(victim, now)
    if again:
        bar *= config.suspend_again_factor
    return slowdown_so_far(preemptor, now) >= bar


def may_drain(victim: PolicyJob, preemptor: PolicyJob, now: float, config: StopRules) -> bool:
    """Drain stop (`drain_stop_share`): a job of the preemptor's class or lower, with at least
    `drain_stop_min_left_s` left, not stopped `suspend_max` times already."""
    if config.drain_stop_share <= 0 or victim.started_at is None:
        return False
    if CLASS_RANK.get(victim.priority_class, 1) > CLASS_RANK.get(preemptor.priority_class, 1):
        return False
    if config.suspend_max and victim.preempt_count >= config.suspend_max:
        return False
    left = victim.started_at + victim.time_limit_s - now
    return left >= config.drain_stop_min_left_s


def can_be_victim(
    victim: PolicyJob, preemptor: PolicyJob, now: float, config: StopRules, drain: bool = False
) -> bool:
    """Whether `victim` may be preempted for `preemptor` at `now` under the thrash protections."""
    if not victim.preemptible or victim.state != "running" or victim.started_at is None:
        return False
    if CLASS_RANK.get(victim.priority_class, 1) >= CLASS_RANK.get(preemptor.priority_class, 1):
        if not (drain and may_drain(victim, preemptor, now, config)) and not may_suspend(
            victim, preemptor, now, config
        ):
            return False
    if victim.preempt_count >= config.max_preemptions_per_job:
        return False
    return now - victim.started_at >= config.min_run_before_preempt_s


def _fewest_needed(
    rows: int, cols: int, wafer: tuple[int, int], held: Sequence[Held], candidates: list[int]
) -> tuple[list[int], tuple[Mer, ...]] | None:
    """Few victims among `candidates` (indexes into `held`, in removal order) and the free
    space they leave, or None if even all of them are not enough.

    Starts from the wafer without any candidate and adds candidates back, last first, while the
    shape still fits; then tries to keep each remaining victim running too. Every step is one
    insert-only MaxRects update.
    """
    others = {*range(len(held))} - set(candidates)
    mers = maximal_empty_rects(wafer[0], wafer[1], [held[i].rect for i in sorted(others)])
    if not fits_in(mers, rows, cols):
        return None
    needed = len(candidates)
    for i in reversed(candidates):
        after = occupy(mers, held[i].rect)
        if not fits_in(after, rows, cols):
            break
        mers, needed = after, needed - 1
    victims = [candidates[needed - 1]] if needed else []
    for i in candidates[: max(0, needed - 1)]:
        after = occupy(mers, held[i].rect)
        if fits_in(after, rows, cols):
            mers = after  # not needed after all: it keeps running
        else:
            victims.append(i)
    return victims, mers


def _victims_on(
    job: PolicyJob,
    wafer: tuple[int, int],
    held: Sequence[Held],
    now: float,
    config: StopRules,
    drain: bool = False,
) -> tuple[list[int], FreeSpace] | None:
    """Indexes (into `held`) of the fewest victims that let `job` fit on this wafer, or None."""
    if job.rows > wafer[0] or job.cols > wafer[1]:
        return None
    eligible = {
        i: h.job
        for i, h in enumerate(held)
        if h.job is not None and can_be_victim(h.job, job, now, config, drain)
    }
    # lowest class first, then the youngest (least work lost since its start), then by id
    candidates = sorted(
        eligible,
        key=lambda i: (
            CLASS_RANK[eligible[i].priority_class],
            -(eligible[i].started_at or 0.0),
            eligible[i].id,
        ),
    )
    free = wafer[0] * wafer[1] - sum(h.rect[2] * h.rect[3] for h in held)
    if free + sum(held[i].rect[2] * held[i].rect[3] for i in candidates) < job.pes:
        return None
    found = _fewest_needed(job.rows, job.cols, wafer, held, candidates)
    if found is None or not found[0]:
        return None
    victims, mers = found
    free += sum(held[i].rect[2] * held[i].rect[3] for i in victims)
    return sorted(victims, key=candidates.index), FreeSpace(wafer[0], wafer[1], mers, free)


def choose_victims(
    job: PolicyJob,
    wafers: Sequence[tuple[int, int, Sequence[Held]] | None],
    now: float,
    config: StopRules,
    drain: bool = False,
) -> PreemptionChoice | None:
    """The cheapest preemption (fewest victims, then fewest PEs; with `drain`, fewest PEs, then
    victims) that lets `job` start, or None. `drain`: jobs `may_drain` allows are victims too."""
    best: tuple[tuple[int, int, int], PreemptionChoice] | None = None
    for w, wafer in enumerate(wafers):
        if wafer is None:
            continue
        found = _victims_on(job, (wafer[0], wafer[1]), wafer[2], now, config, drain)
        if found is None:
            continue
        gone, space = found
        fit = best_fit_on(space, job.rows, job.cols)
        if fit is None:
            continue
        victims = tuple(v for i in gone if (v := wafer[2][i].job) is not None)
        pes = sum(v.pes for v in victims)
        score = (pes, len(victims), w) if drain else (len(victims), pes, w)
        if best is None or score < best[0]:
            best = (score, PreemptionChoice(w, victims, fit[1], fit[2]))
    return None if best is None else best[1]
