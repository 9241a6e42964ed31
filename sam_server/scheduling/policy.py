"""`plan(snapshot, now) -> Plan`: one scheduling cycle as a pure function.

1. Order the waiting jobs: by priority (weighted sum) or, for the anchors, by submit time.
2. Send the highest-priority queued jobs to the free compile slots.
3. Walk the pending jobs in order. A job within its tenant's quotas starts where it fits
   (best fit or first fit; a flexible job none of whose shapes fits may take one cut to a
   free rectangle, `cut_to_fit`; a large one on a nearly full wafer goes where the most jobs
   of its size still fit, `lookahead`). The first job that does not fit is the top blocked job: it may
   preempt lower-class jobs (if that is the only way), or start now by moving one running
   checkpointing job elsewhere (`migration`). Otherwise the first blocked job that has
   been eligible for `reserve_after_s` gets a reservation, a concrete rectangle and start time
   from the running jobs' time limits. Behind it, jobs start
   only outside that rectangle or if they end before it starts (EASY backfill in two
   dimensions); without backfill nothing starts behind it.
4. Explain every job left waiting: all reasons, its position and an ETA.

No database, broker or clock: the same function drives the live loop and `sam sim`, and the same
snapshot always gives the same plan.
"""

from __future__ import annotations

import bisect
import heapq
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from itertools import compress, repeat
from operator import attrgetter, eq

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.explain import ClusterView, estimate_starts, job_reasons
from sam_server.scheduling.fairshare import bounded_slowdown, slowdown_so_far
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.layers import Layer, add_layer, occupy_everywhere
from sam_server.scheduling.migration import choose_migration
from sam_server.scheduling.model import (
    JobExplain,
    JobId,
    Plan,
    PolicyConfig,
    PolicyJob,
    PolicyWafer,
    Preempt,
    PriorityBreakdown,
    Reservation,
    Snapshot,
    Start,
    WaferMetrics,
    arch_matches,
)
from sam_server.scheduling.placement import (
    FitIndex,
    Placement,
    choose_placement,
    lookahead_placement,
)
from sam_server.scheduling.preemption import Held, PreemptionChoice, choose_victims
from sam_server.scheduling.priority import PriorityCalculator
from sam_server.scheduling.quota import QuotaLedger
from sam_server.scheduling.reservation import (
    TimedRect,
    earliest_cut,
    earliest_start,
    earliest_time,
)
from sam_server.states import WAITING

WAITING_STATES = WAITING
MAX_RESERVE_ATTEMPTS = 8
"""Blocked jobs tried for a reservation per cycle (a job whose wafers are all held by jobs with
no known end gets none; the next is tried, but not the whole queue)."""
MAX_RESERVE_SHAPES = 3
"""A flexible job's reservation considers its first few shapes (each costs a time walk)."""
LOOKAHEAD_MAX_SHARE = 3
"""Look-ahead placement is for jobs of at most 1/LOOKAHEAD_MAX_SHARE of a wafer (larger ones:
only with `PolicyConfig.lookahead_pairs`, while a job of about their size waits)."""
LIKE_SIZE = (0.8, 1.25)
"""A waiting job of this range of a starting job's PEs is one "like it" (`_lookahead_start`)."""
MAX_START_SHAPES = 3
"""A flexible job is placed in the best of its first few shapes that fit (each placement scores
every wafer's free rectangles; the first shapes are the least wasteful)."""


@dataclass
class _Cycle:
    """The mutable state of one plan while it is built (never outlives `plan`)."""

    snapshot: Snapshot
    now: float
    config: PolicyConfig
    spaces: list[FreeSpace | None]
    ledger: QuotaLedger
    held: list[list[Held]]
    ends: list[list[TimedRect]]
    starts: list[Start] = field(default_factory=list)
    preemptions: list[Preempt] = field(default_factory=list)
    preempting: dict[JobId, list[JobId]] = field(default_factory=dict)
    preempt_reservation: Reservation | None = None
    reservations: list[Reservation] = field(default_factory=list)
    layers: list[Layer] = field(default_factory=list)
    fit_now: FitIndex | None = None
    preempt_tried: bool = False
    drain_tried: bool = False
    migrate_tried: bool = False
    reserve_attempts: int = 0
    lowest_running_rank: int = len(CLASS_RANK)
    pending: list[PolicyJob] = field(default_factory=list)
    by_size: list[tuple[int, int]] | None = None
    """(PEs, index into `pending`), smallest first: built when look-ahead first asks."""

    @property
    def reservation(self) -> Reservation | None:
        """The top reservation (the preemptor's, or the earliest-starting one)."""
        if self.preempt_reservation is not None:
            return self.preempt_reservation
        return self.reservations[0] if self.reservations else None

    def index_now(self) -> FitIndex:
        if self.fit_now is None:
            self.fit_now = FitIndex(self.spaces)
        return self.fit_now

    def view_for(self, end: float) -> tuple[list[FreeSpace | None], FitIndex]:
        """Free space and fit index for a job ending at `end` (reservations before it blocked)."""
        chosen: Layer | None = None
        for layer in self.layers:
            if layer.start < end:
                chosen = layer
        if chosen is None:
            return self.spaces, self.index_now()
        return chosen.spaces, chosen.index()

    def index_long(self) -> FitIndex:
        """Fit index with every reservation blocked."""
        return self.layers[-1].index() if self.layers else self.index_now()


def _init_cycle(snapshot: Snapshot, now: float, config: PolicyConfig) -> _Cycle:
    """Free space, held rectangles and quota ledger of the snapshot."""
    running_now = [j for j in snapshot.jobs if j.state == "running"]
    jobs_by_id = {j.id: j for j in running_now}  # (an allocation of another job holds it too)
    spaces: list[FreeSpace | None] = []
    held: list[list[Held]] = []
    ends: list[list[TimedRect]] = []
    for wafer in snapshot.wafers:
        rects = [(a.row, a.col, a.rows, a.cols) for a in wafer.allocations]
        jobs = [jobs_by_id.get(a.job_id) for a in wafer.allocations]
        running = [j if j is not None and j.state == "running" else None for j in jobs]
        held.append([Held(r, j) for r, j in zip(rects, running, strict=True)])
        ends.append([TimedRect(r, _end_of(j)) for r, j in zip(rects, running, strict=True)])
        usable = wafer.online and not _slots_full(wafer, len(rects))
        spaces.append(FreeSpace.of(wafer.rows, wafer.cols, rects) if usable else None)
    ledger = QuotaLedger.of(snapshot.tenants, snapshot.jobs)
    cycle = _Cycle(snapshot, now, config, spaces, ledger, held, ends)
    ranks = [CLASS_RANK.get(j.priority_class, 1) for j in running_now]
    cycle.lowest_running_rank = min(ranks, default=len(CLASS_RANK))
    return cycle


def _slots_full(wafer: PolicyWafer, regions: int) -> bool:
    """The wafer's worker runs `max_jobs` regions at once: no more may be placed on it."""
    return wafer.max_jobs is not None and regions >= wafer.max_jobs


def _end_of(job: PolicyJob | None) -> float:
    """When a running job is expected to end (its time limit); inf for an unknown holder."""
    if job is None or job.started_at is None:
        return float("inf")
    return job.started_at + job.time_limit_s


def _queue_order(
    waiting: list[PolicyJob],
    prio_of: Callable[[PolicyJob], PriorityBreakdown] | None,
    config: PolicyConfig,
) -> list[PolicyJob]:
    """Queue order: higher priority first, then earlier eligible, submitted, id (or FIFO).

    Sorted in two stable passes with the same result as one sort by the whole key: the jobs in
    their time-invariant order (eligible, submitted, id), then by priority alone. The first
    order is kept between calls (`_STATIC`): a job object never changes, so the jobs of the
    last call still waiting are still in order and only new ones are sorted in. Priorities are
    computed once per group of jobs equal in every field but the id (an array's tasks), and
    the priority pass runs on an input already ordered within each class (age keeps order),
    where the sort finds long runs instead of comparing 100,000 key tuples n log n times.
    """
    if config.ordering == "fifo" or prio_of is None:
        return sorted(waiting, key=lambda j: (j.submitted_at, j.id))
    static, groups, members = _STATIC.order(waiting)
    by_group = [-prio_of(m).total for m in members]
    totals = list(map(by_group.__getitem__, groups))
    return list(map(static.__getitem__, sorted(range(len(static)), key=totals.__getitem__)))


_ALL_BUT_ID = attrgetter(*(f.name for f in fields(PolicyJob) if f.name != "id"))
"""A job's every field but its id: jobs equal in it have equal priorities."""
_FEW_NEW = 64
"""New jobs inserted one by one (bisect) into the kept order; more are merged by a sort."""


class _StaticOrder:
    """The waiting jobs of the last plan in (eligible_at, submitted_at, id) order, with each
    job's group (see _ALL_BUT_ID) and one job of every group. A memo: the plan never depends
    on it, only the work does. Jobs are frozen, so one object always has one key and group."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[list[PolicyJob], list[int], set[int]] = ([], [], set())
        self._group_ids: dict[tuple[object, ...], int] = {}
        self._members: list[PolicyJob] = []

    def order(self, waiting: list[PolicyJob]) -> tuple[list[PolicyJob], list[int], list[PolicyJob]]:
        """(`waiting` in static order, each one's group, one job of each group)."""
        with self._lock:
            return self._order(waiting)

    def _order(
        self, waiting: list[PolicyJob]
    ) -> tuple[list[PolicyJob], list[int], list[PolicyJob]]:
        last, last_groups, seen = self._last  # `seen`: the ids of `last`
        now = set(map(id, waiting))
        if len(now) < len(waiting):  # one object twice (never from a snapshot): no memo
            self._last = ([], [], set())
            jobs = sorted(waiting, key=_static_key)
            return jobs, list(range(len(jobs))), jobs
        if len(self._members) > 2 * len(waiting) + 1024:  # forget the groups of ended jobs
            self._group_ids, self._members, last, last_groups, seen = {}, [], [], [], set()
        keep = list(map(now.__contains__, map(id, last)))
        kept, groups = list(compress(last, keep)), list(compress(last_groups, keep))
        if len(kept) < len(waiting):
            new = [j for j in waiting if id(j) not in seen]
            if len(new) <= _FEW_NEW:
                for job in sorted(new, key=_static_key):
                    at = bisect.bisect_left(kept, _static_key(job), key=_static_key)
                    kept.insert(at, job)
                    groups.insert(at, self._group(job))
            else:
                merged = kept + new
                merged_groups = groups + [self._group(j) for j in new]
                keys = list(map(_static_key, merged))
                index = sorted(range(len(merged)), key=keys.__getitem__)
                kept = list(map(merged.__getitem__, index))
                groups = list(map(merged_groups.__getitem__, index))
        self._last = (kept, groups, now)
        return kept, groups, self._members

    def _group(self, job: PolicyJob) -> int:
        key = _ALL_BUT_ID(job)
        found = self._group_ids.get(key)
        if found is None:
            found = self._group_ids[key] = len(self._members)
            self._members.append(job)
        return found


_ID, _STATE, _TENANT = attrgetter("id"), attrgetter("state"), attrgetter("tenant")
_IS_WAITING = frozenset(WAITING_STATES).__contains__


def _in_state(jobs: list[PolicyJob], state: str) -> list[PolicyJob]:
    """The jobs in `state`, in order (C-speed passes: this runs over 100,000 jobs)."""
    return list(compress(jobs, map(eq, repeat(state), map(_STATE, jobs))))


def _static_key(job: PolicyJob) -> tuple[float | JobId, ...]:
    return (job.eligible_at, job.submitted_at, job.id)


_STATIC = _StaticOrder()


def _start(cycle: _Cycle, job: PolicyJob, wafer_index: int, row: int, col: int) -> None:
    """Record a start (in `job`'s shape) and take its rectangle out of every view."""
    rect = (row, col, job.rows, job.cols)
    space = cycle.spaces[wafer_index]
    assert space is not None
    occupy_everywhere(cycle.layers, space, wafer_index, rect)
    cycle.fit_now = None
    cycle.ledger.add(job)
    cycle.held[wafer_index].append(Held(rect, None))
    cycle.ends[wafer_index].append(TimedRect(rect, cycle.now + job.time_limit_s))
    wafer = cycle.snapshot.wafers[wafer_index]
    cycle.starts.append(Start(job.id, wafer.id, row, col, job.rows, job.cols))
    if _slots_full(wafer, len(cycle.held[wafer_index])):  # every worker slot is now taken
        cycle.spaces[wafer_index] = None
        for layer in cycle.layers:
            layer.spaces[wafer_index], layer.fit = None, None


def _for_arch(
    cycle: _Cycle, job: PolicyJob, spaces: list[FreeSpace | None]
) -> list[FreeSpace | None]:
    """`spaces` with every wafer of another arch than the job's masked out (None)."""
    if job.arch is None:
        return spaces
    wafers = cycle.snapshot.wafers
    return [s if arch_matches(w, job) else None for s, w in zip(spaces, wafers, strict=True)]


def _try_start(cycle: _Cycle, job: PolicyJob) -> bool:
    """Start `job` now if one of its shapes fits (around the reservations); True if it did.

    A flexible job's shapes are all scored and the best placement wins (ties: the asked shape).
    When none fits and `cut_to_fit` is on, shapes cut to the free rectangles are tried.
    """
    config = cycle.config
    shapes = job.candidate_shapes(config.flexible)
    longest = max(job.limit_in(r, c) for r, c in shapes) if job.work_pes else job.time_limit_s
    views, index = cycle.view_for(cycle.now + longest)
    views = _for_arch(cycle, job, views)
    best = _best_start(cycle, job, shapes, views, index)
    if best is None and config.cut_to_fit and config.flexible and job.cut_bounds is not None:
        cut = index.cut_shapes(*job.cut_bounds)
        best = _best_start(cycle, job, cut, views, index) if cut else None
    if best is None:
        return False
    if config.lookahead > 0 and config.flexible and job.cut_bounds is not None:
        best = _lookahead_start(cycle, job, shapes, views, best)
    spot, (rows, cols) = best
    shaped = job
    if (rows, cols) != (job.rows, job.cols):
        shaped = replace(job, rows=rows, cols=cols, time_limit_s=job.limit_in(rows, cols))
    _start(cycle, shaped, spot.wafer_index, spot.row, spot.col)
    return True


def _lookahead_start(
    cycle: _Cycle,
    job: PolicyJob,
    shapes: Sequence[tuple[int, int]],
    views: list[FreeSpace | None],
    best: tuple[Placement, tuple[int, int]],
) -> tuple[Placement, tuple[int, int]]:
    """`best`, or (`PolicyConfig.lookahead`) when it lands on a wafer with room for only a few
    more jobs like this one, the placement that keeps room for the most of them
    (`placement.lookahead_placement`).

    Not for a job of more than a third of a wafer (packing two halves flush, 23x17 + 23x17 on
    23x34, leaves no PE for the small jobs 1-D EASY still runs beside them: NASA 6pe x0.5's
    slowdown rose 1.3x) unless (`lookahead_pairs`) a job like it waits now, which then starts
    beside it at once (two 384-PE jobs on an empty 23x34: best fit puts the first in 16x24 and
    the second waits it out; as 23x17 + 23x17 both run); nor while a smaller job waits (the
    room kept is then the small jobs' to take, not the next large job's)."""
    pes, aspect = job.cut_bounds or (job.pes, 1.0)
    depth = cycle.config.lookahead
    space = views[best[0].wafer_index]
    if space is None or space.free_pes >= pes * (depth + 2):
        return best  # room for more than `depth` + 1 such jobs: any placement keeps it
    if pes * LOOKAHEAD_MAX_SHARE > space.rows * space.cols:
        low, high = math.ceil(pes * LIKE_SIZE[0]), math.floor(pes * LIKE_SIZE[1])
        if not cycle.config.lookahead_pairs or not _waiting_sized(cycle, low, high, job.id):
            return best  # (no job like it waits to take the room kept)
    if _waiting_sized(cycle, 0, pes - 1):
        return best  # a smaller job waits

    def allowed(shape: tuple[int, int]) -> bool:
        area = shape[0] * shape[1]
        return area >= job.work_pes and _within_quota(cycle, job, area)

    found = lookahead_placement(views, shapes, pes, aspect, depth, allowed)
    return best if found is None else found


def _waiting_sized(cycle: _Cycle, low: int, high: int, but: JobId | None = None) -> bool:
    """Whether a job of this cycle's walk with `low` to `high` PEs, other than `but`, is still
    waiting (not started this cycle).

    The walk's jobs are sorted by size once per cycle (on the first call); a call finds `low`
    by bisection and skips only the jobs of that size range that started this cycle, so it
    costs O(log queue + starts), not O(queue)."""
    if cycle.by_size is None:
        cycle.by_size = sorted((j.work_pes or j.pes, i) for i, j in enumerate(cycle.pending))
    by_size = cycle.by_size
    started = {s.job_id for s in cycle.starts}
    for at in range(bisect.bisect_left(by_size, (low, -1)), len(by_size)):
        size, i = by_size[at]
        if size > high:
            return False
        other = cycle.pending[i].id
        if other != but and other not in started:
            return True
    return False


def _within_quota(cycle: _Cycle, job: PolicyJob, area: int) -> bool:
    """Whether `job` may hold `area` PEs: a shape larger than it asked for must not take its
    tenant over max_pes."""
    return area <= job.pes or cycle.ledger.allows(job, area)


def _best_start(
    cycle: _Cycle,
    job: PolicyJob,
    shapes: Sequence[tuple[int, int]],
    views: list[FreeSpace | None],
    index: FitIndex,
) -> tuple[Placement, tuple[int, int]] | None:
    """The best placement among the first few of `shapes` that fit, and its shape, or None."""
    best: tuple[tuple[tuple[int, ...], int], Placement, tuple[int, int]] | None = None
    tried = 0
    for rows, cols in shapes:
        if tried >= MAX_START_SHAPES:
            break
        if best is not None and rows * cols < job.work_pes:
            break  # a moldable job's shrunk shapes (last) only when no full shape fits
        if not index.fits(rows, cols):
            continue
        if not _within_quota(cycle, job, rows * cols):
            continue
        tried += 1
        beat = best[0][0][:2] if best is not None else None
        spot = choose_placement(views, rows, cols, cycle.config.placement, beat)
        if spot is None:
            continue
        key = (spot.score, rows * cols)
        if best is None or key < best[0]:
            best = (key, spot, (rows, cols))
    return None if best is None else (best[1], best[2])


def _try_preempt(cycle: _Cycle, job: PolicyJob) -> bool:
    """Preempt lower-class jobs for the top blocked `job` if that lets it start; True if so."""
    choice = choose_victims(job, _held_wafers(cycle, job), cycle.now, cycle.config)
    if choice is None:
        return False
    reasons = []
    for victim in choice.victims:
        reason = f"preempted for {job.priority_class}-class job {job.id}"
        if victim.priority_class == job.priority_class:  # selective suspension
            mine, theirs = slowdown_so_far(victim, cycle.now), slowdown_so_far(job, cycle.now)
            reason = (
                f"suspended for job {job.id} of its class: its slowdown so far is "
                f"{theirs:.1f}, this job's {mine:.1f} (suspend_factor)"
            )
        reasons.append(reason)
    _stop_for(cycle, job, choice, reasons)
    return True


def _held_wafers(cycle: _Cycle, job: PolicyJob) -> list[tuple[int, int, list[Held]] | None]:
    """Each wafer's size and held rectangles, None for one `job` cannot use (offline, full, or
    of another arch): what preemption, drain stop and migration choose among."""
    return [
        (w.rows, w.cols, cycle.held[i])
        if cycle.spaces[i] is not None and arch_matches(w, job)
        else None
        for i, w in enumerate(cycle.snapshot.wafers)
    ]


def _stop_for(cycle: _Cycle, job: PolicyJob, choice: PreemptionChoice, reasons: list[str]) -> None:
    """Plan the stops of `choice`'s victims (one reason each) and hold their place for `job`."""
    for victim, reason in zip(choice.victims, reasons, strict=True):
        cycle.preemptions.append(Preempt(victim.id, job.id, reason))
    cycle.preempting[job.id] = [v.id for v in choice.victims]
    wafer = cycle.snapshot.wafers[choice.wafer_index]
    cycle.preempt_reservation = Reservation(
        job.id, wafer.id, choice.row, choice.col, job.rows, job.cols, cycle.now
    )


def _may_drain(cycle: _Cycle, job: PolicyJob) -> bool:
    """Whether `job` gets this cycle's one drain stop attempt (`drain_stop_share`): only the
    first blocked job is asked, and only if it needs `drain_stop_min_job` of a wafer and has
    waited `reserve_after_s`."""
    if cycle.config.drain_stop_share <= 0 or not cycle.config.preemption or cycle.drain_tried:
        return False
    cycle.drain_tried = True
    wafer_pes = max(w.rows * w.cols for w in cycle.snapshot.wafers)
    if job.pes < cycle.config.drain_stop_min_job * wafer_pes:
        return False
    return cycle.now - job.eligible_at >= cycle.config.reserve_after_s


def _try_drain(cycle: _Cycle, job: PolicyJob) -> bool:
    """Stop the few running jobs left in the way of a big blocked `job` so that it starts now
    (`drain_stop_share`); True if stops were planned.

    Where a large job waits for a wafer to drain, the PEs freed before its start idle unless a
    job that ends in time backfills them; when the jobs still in its way hold little of its
    rectangle, stopping them costs their checkpoint and restart, waiting for them costs the
    rest of the rectangle for as long as they have left. The victims with the fewest PEs are
    chosen (`preemption.choose_victims` with `drain`)."""
    choice = choose_victims(job, _held_wafers(cycle, job), cycle.now, cycle.config, drain=True)
    if choice is None:
        return False
    if sum(v.pes for v in choice.victims) > cycle.config.drain_stop_share * job.pes:
        return False
    reason = (
        f"stopped so that job {job.id}, which needs {job.pes} PEs, starts in the drained "
        f"rectangle now (drain_stop_share)"
    )
    _stop_for(cycle, job, choice, [reason] * len(choice.victims))
    return True


def _may_migrate(cycle: _Cycle, job: PolicyJob) -> bool:
    """Whether `job` gets this cycle's one migration attempt: the first blocked job, before any
    reservation is made, once it has waited `reserve_after_s`."""
    if not cycle.config.migration or cycle.migrate_tried or cycle.reservations:
        return False
    if cycle.now - job.eligible_at < cycle.config.reserve_after_s:
        return False
    cycle.migrate_tried = True
    return True


def _try_migrate(cycle: _Cycle, job: PolicyJob) -> bool:
    """Move one running checkpointing job so that `job` starts now; True if a move was planned.

    Only when `job` would otherwise wait `migrate_min_gain_s` or more (its earliest start from
    the running jobs' limits). The moved job's target and `job`'s rectangle are taken out of
    the free space at once, so nothing else this cycle lands on them.
    """
    wafers = _held_wafers(cycle, job)
    timed = [
        (w.rows, w.cols, cycle.ends[i]) if wafers[i] is not None else None
        for i, w in enumerate(cycle.snapshot.wafers)
    ]
    shapes = job.candidate_shapes(cycle.config.flexible)[:MAX_RESERVE_SHAPES]
    wait = min(earliest_time(r, c, timed) for r, c in shapes) - cycle.now
    if wait < cycle.config.migrate_min_gain_s:
        return False
    choice = choose_migration(
        job, wafers, cycle.spaces, cycle.snapshot.wafers, cycle.now, cycle.config
    )
    if choice is None:
        return False
    moved, wafers_ = choice.job, cycle.snapshot.wafers
    to = (wafers_[choice.to_index].id, *choice.to_rect)
    reason = f"migrated to {to[0]} at ({to[1]}, {to[2]}) so that job {job.id} can start"
    cycle.preemptions.append(Preempt(moved.id, job.id, reason, to))
    cycle.preempting[job.id] = [moved.id]
    held = cycle.held[choice.from_index]
    old = next(h.rect for h in held if h.job is moved)
    # the moved job's old rectangle goes to `job`, its target is held: rebuild both wafers' space
    cycle.held[choice.from_index] = [h for h in held if h.job is not moved]
    cycle.held[choice.from_index].append(
        Held((choice.row, choice.col, choice.rows, choice.cols), None)
    )
    cycle.held[choice.to_index].append(Held(choice.to_rect, None))
    for i in {choice.from_index, choice.to_index}:
        w = wafers_[i]
        full = _slots_full(w, len(cycle.held[i]))  # the move may take a wafer's last slot
        cycle.spaces[i] = (
            None if full else FreeSpace.of(w.rows, w.cols, [h.rect for h in cycle.held[i]])
        )
    cycle.ends[choice.from_index] = [t for t in cycle.ends[choice.from_index] if t.rect != old]
    cycle.ends[choice.from_index].append(
        TimedRect((choice.row, choice.col, choice.rows, choice.cols), cycle.now + job.time_limit_s)
    )
    cycle.ends[choice.to_index].append(TimedRect(choice.to_rect, cycle.now + moved.time_limit_s))
    cycle.fit_now = None
    wafer = wafers_[choice.wafer_index]
    cycle.preempt_reservation = Reservation(
        job.id, wafer.id, choice.row, choice.col, choice.rows, choice.cols, cycle.now
    )
    return True


def _reserve(cycle: _Cycle, job: PolicyJob) -> None:
    """Give a blocked job a rectangle and start time; block it for the jobs that overlap it.

    Earlier reservations count as held until they end, so a later one never overlaps them in
    space and time. A flexible job reserves whichever of its shapes starts first.
    """
    extra: list[list[TimedRect]] = [[] for _ in cycle.snapshot.wafers]
    index = {w.id: i for i, w in enumerate(cycle.snapshot.wafers)}
    for res in cycle.reservations:
        rect = (res.row, res.col, res.rows, res.cols)
        extra[index[res.wafer_id]].append(TimedRect(rect, res.start_time + res.time_limit_s))
    wafers = [
        (w.rows, w.cols, cycle.ends[i] + extra[i])
        if cycle.spaces[i] is not None and arch_matches(w, job)
        else None
        for i, w in enumerate(cycle.snapshot.wafers)
    ]
    shapes = job.candidate_shapes(cycle.config.flexible)[:MAX_RESERVE_SHAPES]
    if len(shapes) > 1:  # the shape that can start first (then the smallest), placed below
        times = [
            (max(cycle.now, earliest_time(r, c, wafers)), r * c, i)
            for i, (r, c) in enumerate(shapes)
        ]
        first = min(times)
        shapes = (shapes[first[2]],)
        cut_too = cycle.config.cut_to_fit and cycle.config.cut_reserve
        if cut_too and job.cut_bounds is not None and first[0] > cycle.now:
            cut = earliest_cut(*job.cut_bounds, wafers)  # a shape cut to the space then
            if cut is not None and max(cycle.now, cut[0]) < first[0]:
                shapes = (cut[1],)
    rows, cols = shapes[0]
    busy = None
    if cycle.config.reserve_off_free:  # (every rectangle held now: running and started)
        busy = [[t.rect for t in ends] for ends in cycle.ends]
    found = earliest_start(rows, cols, wafers, cycle.now, cycle.config.placement, busy)
    if found is None:
        return
    wafer = cycle.snapshot.wafers[found.wafer_index]
    res = Reservation(
        job.id, wafer.id, found.row, found.col, rows, cols, found.start, job.limit_in(rows, cols)
    )
    cycle.reservations.append(res)
    cycle.reservations.sort(key=lambda r: (r.start_time, str(r.job_id)))
    add_layer(
        cycle.layers,
        cycle.spaces,
        found.wafer_index,
        (found.row, found.col, rows, cols),
        found.start,
    )


def _schedule_pending(cycle: _Cycle, pending: list[PolicyJob]) -> None:
    """The walk of step 3 over pending jobs in queue order."""
    blocked_seen = False
    cycle.pending = pending
    for job in pending:
        if not cycle.ledger.allows(job):
            continue  # quota-held jobs neither start nor hold back the jobs behind them
        if blocked_seen and not cycle.config.backfill:
            break  # strict order: nothing overtakes the blocked head of the queue
        if _try_start(cycle, job):
            continue
        blocked_seen = True
        if len(cycle.reservations) >= cycle.config.reservations or cycle.preempting:
            continue
        if _may_preempt(cycle, job) and _try_preempt(cycle, job):
            continue
        if _may_migrate(cycle, job) and _try_migrate(cycle, job):
            continue
        if _may_drain(cycle, job) and _try_drain(cycle, job):
            continue  # (after migration: a moved job keeps running, a stopped one waits)
        if cycle.now - job.eligible_at >= cycle.config.reserve_after_s:
            if cycle.reserve_attempts < MAX_RESERVE_ATTEMPTS:
                cycle.reserve_attempts += 1
                _reserve(cycle, job)


def _oldest_first(pending: list[PolicyJob], cycle: _Cycle) -> list[PolicyJob]:
    """The walk order: the `protect_oldest` longest-waiting jobs of the top class go first.

    Ordering by priority alone lets a steady stream of short jobs keep a long one waiting; put
    first, the oldest jobs start or take the first reservations, so their wait is bounded as
    under EASY (whose first blocked job is always the oldest), while the rest go by priority.
    Only jobs that have waited `reserve_after_s` are moved.
    """
    count = cycle.config.protect_oldest
    if (count <= 0 and cycle.config.overdue_wait_s <= 0) or len(pending) < 2:
        return pending
    top = max(CLASS_RANK.get(j.priority_class, 1) for j in pending)
    requeue = cycle.config.requeue_stopped

    def since(j: PolicyJob) -> float:
        """Seniority: eligible since, or (`requeue_stopped`) stopped at."""
        at = j.last_preempted_at
        return at if requeue and at is not None else j.eligible_at

    peers = [
        j
        for j in pending
        if CLASS_RANK.get(j.priority_class, 1) == top
        and cycle.now - since(j) >= cycle.config.reserve_after_s
        and (j.last_preempted_at is None or not _just_stopped(j, cycle))
    ]
    if not peers:
        return pending
    peers.sort(key=lambda j: (since(j), j.submitted_at, str(j.id)))
    bound = cycle.config.overdue_wait_s
    factor = cycle.config.overdue_median_factor
    if factor > 0 and len(peers) >= 3:
        # dynamic aging: overdue once the wait passes `factor` x the median wait of the peers
        median = cycle.now - since(peers[len(peers) // 2])
        dynamic = max(factor * median, cycle.config.reserve_after_s)
        bound = min(bound, dynamic) if bound > 0 else dynamic
    overdue = 0
    if bound > 0:
        while overdue < len(peers) and cycle.now - since(peers[overdue]) >= bound:
            overdue += 1
        if factor > 0:
            overdue = min(overdue, cycle.config.overdue_max)
    return _put_first(peers[: max(count, overdue)], pending)


def _first_after_stop(pending: list[PolicyJob], cycle: _Cycle) -> list[PolicyJob]:
    """Who goes first in the walk right after a stop (a job preempted less than
    `min_run_before_preempt_s` ago is back in the queue), ahead of the protected oldest, to
    take the space it freed: the waiting jobs it was stopped for (`PolicyJob.stopped_for`), or
    if none waits any more, with `suspend_factor`, the job furthest behind (`_most_behind`).
    Without it the next in line took that space (the oldest, a 12x11 job of 8,960 s, on
    lublin's first 150 jobs) and the short job suspended a second job. [] when nothing was
    just stopped (one pass over the queue per cycle).

    Measured (`benchmarks/policy_sim.py --matrix`): 20 of 24, worst 1-D ratio 1.43; the job
    furthest behind alone (not told which job asked) 18 / 1.48; the named jobs alone 18 / 2.23
    (the replay is chaotic: one different start moves a case's tail); the furthest behind
    first in every cycle 14 / 1.47 (lublin's max wait and utilization lost)."""
    stopped = [j for j in pending if j.last_preempted_at is not None and _just_stopped(j, cycle)]
    if not stopped:
        return []
    wanted = {j.stopped_for for j in stopped if j.stopped_for is not None}
    named = [j for j in pending if j.id in wanted] if wanted else []
    if named:
        return named
    behind = _most_behind(pending, cycle)
    return [] if behind is None else [behind]


def _most_behind(pending: list[PolicyJob], cycle: _Cycle) -> PolicyJob | None:
    """With `suspend_factor`: the waiting job of the top class furthest behind, if its bounded
    slowdown so far reaches the factor, else None. With `requeue_stopped`, a stopped job's
    wait counts from its stop."""
    factor = cycle.config.suspend_factor
    if factor <= 0 or not cycle.config.preemption or not pending:
        return None
    top = max(CLASS_RANK.get(j.priority_class, 1) for j in pending)
    now, best, worst = cycle.now, None, factor
    requeue = cycle.config.requeue_stopped
    for job in pending:
        if CLASS_RANK.get(job.priority_class, 1) != top:
            continue
        at = job.last_preempted_at
        if requeue and at is not None:
            behind = bounded_slowdown(now - at, job.time_limit_s)
        else:
            behind = slowdown_so_far(job, now)
        if behind > worst or (behind == worst and best is None):
            best, worst = job, behind
    return best


def _put_first(first: list[PolicyJob], pending: list[PolicyJob]) -> list[PolicyJob]:
    """`pending` with the jobs of `first` moved to the front, in that order, once each."""
    if not first:
        return pending
    chosen: dict[int, PolicyJob] = {}
    for job in first:
        chosen.setdefault(id(job), job)
    return [*chosen.values(), *(j for j in pending if id(j) not in chosen)]


def _just_stopped(job: PolicyJob, cycle: _Cycle) -> bool:
    """A job preempted less than `min_run_before_preempt_s` ago: it does not go first as the
    oldest (with `suspend_factor` it was stopped for a job of its own class, which would
    otherwise lose the space it was freed for to it at once)."""
    at = job.last_preempted_at
    return at is not None and cycle.now - at < cycle.config.min_run_before_preempt_s


def _may_preempt(cycle: _Cycle, job: PolicyJob) -> bool:
    """Whether `job` gets this cycle's one preemption attempt: the first blocked job whose class
    is above the lowest class running (checking every blocked job would cost O(queue x held))."""
    if not cycle.config.preemption or cycle.preempt_tried:
        return False
    if CLASS_RANK.get(job.priority_class, 1) <= cycle.lowest_running_rank:
        factor = cycle.config.suspend_factor
        if factor <= 0 or slowdown_so_far(job, cycle.now) < factor:
            return False  # (no running job's slowdown is below 1: none could be suspended)
    cycle.preempt_tried = True
    return True


def compile_queue(
    ordered: list[PolicyJob], jobs: tuple[PolicyJob, ...], ledger: QuotaLedger
) -> list[PolicyJob]:
    """The queued jobs in the order they get compile slots: fair between tenants.

    Each next place goes to the tenant with the fewest compiles in flight or already placed
    ahead (ties: the tenant whose next job comes first in `ordered`), so one tenant's many or
    slow models cannot queue ahead of every other tenant's compile. Within a tenant, `ordered`.
    """
    over = ledger.over_queued
    queued = _in_state(ordered, "queued")
    if over:
        queued = [j for j in queued if j.id not in over]
    if len(set(map(_TENANT, queued))) <= 1:  # one tenant: its own order (the heap gives it)
        return queued
    per_tenant: dict[str, list[PolicyJob]] = {}
    for job in queued:
        per_tenant.setdefault(job.tenant, []).append(job)
    load: dict[str, int] = {}
    for job in jobs:
        if job.state == "compiling":
            load[job.tenant] = load.get(job.tenant, 0) + 1
    rank = {id(j): k for k, j in enumerate(ordered)}
    heap = [(load.get(t, 0), rank[id(q[0])], t) for t, q in per_tenant.items()]
    heapq.heapify(heap)
    taken = dict.fromkeys(per_tenant, 0)
    out: list[PolicyJob] = []
    while heap:
        n, _, tenant = heapq.heappop(heap)
        queue = per_tenant[tenant]
        out.append(queue[taken[tenant]])
        taken[tenant] += 1
        if taken[tenant] < len(queue):
            heapq.heappush(heap, (n + 1, rank[id(queue[taken[tenant]])], tenant))
    return out


def _compiles(queue: list[PolicyJob], snapshot: Snapshot) -> list[JobId]:
    """The first jobs of the compile queue for the free slots, each tenant within its cap."""
    cap = snapshot.compile_slots_per_tenant
    held: dict[str, int] = {}
    if snapshot.compile_slots_free <= 0 or not queue:
        return []  # (the walk below would choose none)
    if cap:
        for tenant in [j.tenant for j in snapshot.jobs if j.state == "compiling"]:
            held[tenant] = held.get(tenant, 0) + 1
    # tenants below their cap: once none is left, no later job can be chosen
    room = {t for t in set(map(_TENANT, queue)) if not cap or held.get(t, 0) < cap}
    chosen: list[JobId] = []
    for job in queue:
        if len(chosen) >= snapshot.compile_slots_free or not room:
            break
        if cap and held.get(job.tenant, 0) >= cap:
            continue
        held[job.tenant] = held.get(job.tenant, 0) + 1
        chosen.append(job.id)
        if cap and held[job.tenant] >= cap:
            room.discard(job.tenant)
    return chosen


def plan(
    snapshot: Snapshot,
    now: float,
    config: PolicyConfig | None = None,
    explain: bool = True,
    explain_only: Callable[[Sequence[PolicyJob]], list[int]] | None = None,
) -> Plan:
    """One scheduling cycle: compiles, starts, preemptions, and the explanation of every wait.

    `config` overrides `snapshot.config`. `now` is the caller's time in float seconds.
    `explain=False` (trace replay only) skips `waiting` and `order`, which are then empty; the
    decisions are the same. `explain_only(jobs)`: the indexes, ascending, of the jobs to explain
    among those left waiting in queue order (the live loop stores a few thousand explanations a
    cycle, not 100,000); `order` is whole.
    """
    config = config or snapshot.config
    cycle = _init_cycle(snapshot, now, config)
    waiting = list(compress(snapshot.jobs, map(_IS_WAITING, map(_STATE, snapshot.jobs))))
    prio_of: Callable[[PolicyJob], PriorityBreakdown] | None = None
    if explain or config.ordering == "priority":
        cluster_pes = sum(w.rows * w.cols for w in snapshot.wafers if w.online)
        calc = PriorityCalculator(snapshot.tenants, cluster_pes, config)
        prio_of = partial(calc.breakdown, now=now)  # (shared per equal job within one `now`)
    ordered = _queue_order(waiting, prio_of, config)
    queue = compile_queue(ordered, snapshot.jobs, cycle.ledger)
    compiles = _compiles(queue, snapshot)
    pending = _in_state(ordered, "pending")
    walk = _oldest_first(pending, cycle)
    walk = _put_first(_first_after_stop(pending, cycle), walk)
    _schedule_pending(cycle, walk)
    started = {s.job_id for s in cycle.starts}
    left = [j for j in ordered if j.id not in started] if started else ordered
    left = left if explain else []
    return Plan(
        compiles=compiles,
        starts=cycle.starts,
        preemptions=cycle.preemptions,
        waiting=_explain_all(cycle, left, prio_of, set(compiles), queue, explain_only)
        if explain
        else {},
        reservation=cycle.reservation,
        wafer_metrics=_metrics(cycle),
        order=list(map(_ID, left)),
        reservations=list(cycle.reservations),
    )


def _explain_all(
    cycle: _Cycle,
    left: list[PolicyJob],
    prio_of: Callable[[PolicyJob], PriorityBreakdown] | None,
    dispatched: set[JobId],
    compile_order: list[PolicyJob],
    only: Callable[[Sequence[PolicyJob]], list[int]] | None = None,
) -> dict[JobId, JobExplain]:
    """JobExplain for every job left waiting, in queue order; a queued job's compiles ahead
    are counted in the compile queue (fair between tenants), not in the priority order.

    Work is proportional to the jobs explained, plus C-speed passes over the rest: with
    `only`, the jobs at the indexes it gives; the counts of jobs ahead come from `list.count`
    over the states between two explained jobs."""
    undispatched = list(map(_ID, compile_order))
    if dispatched:
        undispatched = [i for i in undispatched if i not in dispatched]
    ahead = dict(zip(undispatched, range(len(undispatched)), strict=True))
    wafers = cycle.snapshot.wafers
    view = ClusterView(
        spaces=cycle.spaces,
        fit_now=cycle.index_now(),
        fit_long=cycle.index_long(),
        reservation=cycle.reservation,
        shapes=[(w.rows, w.cols) for w in wafers if w.online],
        dispatched=dispatched,
        preempting=cycle.preempting,
        flexible=cycle.config.flexible,
    )
    held = [
        (t.end, t.rect[2] * t.rect[3])
        for i, ends in enumerate(cycle.ends)
        for t in ends
        if wafers[i].online
    ]
    picked = list(range(len(left))) if only is None else only(left)
    etas = estimate_starts(
        left,
        held,
        sum(r * c for r, c in view.shapes),
        max((r * c for r, c in view.shapes), default=0),
        cycle.now,
        cycle.reservation,
        # no job behind the last one explained needs one
        min(cycle.config.eta_depth, picked[-1] + 1 if picked else 0),
    )
    # each job's state, "" for a queued job sent to compile (it counts in neither total)
    states = list(map(_STATE, left))
    if dispatched:
        states = [
            s if i not in dispatched else "" for s, i in zip(states, map(_ID, left), strict=True)
        ]
    assert prio_of is not None  # (plan computes priorities whenever it explains)
    out: dict[JobId, JobExplain] = {}
    pending_ahead = queued_ahead = counted = 0
    for k in picked:
        if k == counted + 1:  # (every job explained: no slice per job)
            pending_ahead += states[counted] == "pending"
            queued_ahead += states[counted] == "queued"
        elif k > counted:
            between = states[counted:k]
            pending_ahead += between.count("pending")
            queued_ahead += between.count("queued")
        counted = k
        job = left[k]
        compiles_ahead = ahead.get(job.id, queued_ahead)
        why = job_reasons(job, view, cycle.ledger, pending_ahead, compiles_ahead, cycle.now)
        out[job.id] = JobExplain(k + 1, prio_of(job), why, etas.get(job.id))
    return out


def _metrics(cycle: _Cycle) -> dict[str, WaferMetrics]:
    """Free PEs, largest free rectangle and fragmentation of each wafer after the starts."""
    out = {}
    for i, wafer in enumerate(cycle.snapshot.wafers):
        space = cycle.spaces[i]
        if space is None:
            rects = [(a.row, a.col, a.rows, a.cols) for a in wafer.allocations]
            space = FreeSpace.of(wafer.rows, wafer.cols, rects)
        out[wafer.id] = WaferMetrics(
            wafer.id, space.free_pes, space.largest_free_rect(), space.fragmentation()
        )
    return out
