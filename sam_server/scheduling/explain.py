"""Every reason a job waits, and an estimated start time, from the state a plan leaves behind."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from sam_server.scheduling import reasons
from sam_server.scheduling.geometry import FreeSpace, table_fits
from sam_server.scheduling.model import JobId, PolicyJob, Reason, Reservation
from sam_server.scheduling.placement import FitIndex
from sam_server.scheduling.quota import QuotaLedger


@dataclass
class ClusterView:
    """What the explain step needs from the finished plan: free space now and the reservation."""

    spaces: Sequence[FreeSpace | None]
    fit_now: FitIndex
    fit_long: FitIndex
    reservation: Reservation | None
    shapes: list[tuple[int, int]]
    dispatched: set[JobId] = field(default_factory=set)
    preempting: dict[JobId, list[JobId]] = field(default_factory=dict)
    flexible: bool = True
    most_free: int = 0
    largest: tuple[int, int] = (0, 0)
    distinct: frozenset[tuple[int, int]] = frozenset()  # `shapes` once each (100 equal wafers)
    wafer_widths: list[int] = field(default_factory=list)  # `shapes` as a widths table

    def __post_init__(self) -> None:
        self.distinct = frozenset(self.shapes)
        tallest = max((r for r, _ in self.distinct), default=-1)
        self.wafer_widths = [
            max((c for r, c in self.distinct if r >= h), default=-1) for h in range(tallest + 1)
        ]
        usable = [s for s in self.spaces if s is not None]
        self.most_free = max((s.free_pes for s in usable), default=0)
        rects = [s.largest_free_rect() for s in usable]
        self.largest = max(rects, key=lambda rc: rc[0] * rc[1], default=(0, 0))


def _resource_reasons(job: PolicyJob, view: ClusterView, now: float) -> list[Reason]:
    """WaferUnavailable, Resources, Fragmented or ReservedFor, whichever holds for `job` now."""
    rows, cols = job.rows, job.cols
    if not table_fits(view.wafer_widths, rows, cols):  # no online wafer is that large
        return [reasons.wafer_unavailable(rows, cols)]
    if not view.fit_now.fits(rows, cols):
        if view.most_free < rows * cols:
            return [reasons.resources(rows * cols, view.most_free)]
        return [reasons.fragmented(rows, cols, view.largest)]
    res = view.reservation
    if res is not None and res.job_id != job.id and now + job.time_limit_s > res.start_time:
        if not view.fit_long.fits(rows, cols):
            return [reasons.reserved_for(res.job_id, res.start_time, res.wafer_id)]
    return []


def _flexible_reasons(job: PolicyJob, view: ClusterView, now: float) -> list[Reason]:
    """The resource reasons of the asked shape, unless another accepted shape fits now; a
    flexible job's message names how many other shapes it would take."""
    shapes = job.candidate_shapes(view.flexible)
    found = _resource_reasons(job, view, now)
    if not found or len(shapes) == 1:
        return found
    ends_after = now + job.time_limit_s
    res = view.reservation
    around = res is None or res.job_id == job.id or ends_after <= res.start_time
    fits = view.fit_now.fits if around else view.fit_long.fits
    for rows, cols in shapes[1:]:
        if fits(rows, cols):
            return []
    extra = f" (none of its {len(shapes) - 1} other accepted shapes fits either)"
    return [Reason(r.code, r.message + extra) for r in found]


def job_reasons(
    job: PolicyJob,
    view: ClusterView,
    ledger: QuotaLedger,
    waiting_ahead: int,
    compiles_ahead: int,
    now: float,
) -> tuple[Reason, ...]:
    """All the reasons `job` is not running after this plan (never empty)."""
    found: list[Reason] = []
    state = job.state
    if state == "queued":
        found.append(reasons.compile_pending(compiles_ahead, job.id in view.dispatched))
    elif state == "compiling":
        found.append(reasons.compiling())
    victims = view.preempting.get(job.id) if view.preempting else None
    if victims is not None:
        found.append(reasons.preempting(victims))
    if state == "pending" and waiting_ahead > 0:
        found.append(reasons.priority(waiting_ahead))
    found.extend(ledger.blocks(job))
    if victims is None:
        found.extend(_flexible_reasons(job, view, now))
    if not found:  # fits and is allowed, but was not started this cycle (e.g. strict order)
        found.append(reasons.priority(waiting_ahead))
    return tuple(found)


def estimate_starts(
    ordered: Sequence[PolicyJob],
    held: Sequence[tuple[float, int]],
    capacity: int,
    largest_wafer: int,
    now: float,
    reservation: Reservation | None,
    depth: int,
) -> dict[JobId, float | None]:
    """ETA of each waiting job: list scheduling by PE count in queue order, no backfill.

    `held` is (end time, PEs) of each running job (this plan's starts included) and `capacity`
    the PEs of all online wafers. Geometry is ignored except for the reserved job, whose ETA is
    its reservation's start. The estimate is pessimistic (backfill may start a job sooner).
    Jobs larger than every online wafer get None; jobs beyond `depth` are left out (None).
    """
    heap = [(max(now, end), pes) for end, pes in held]
    heapq.heapify(heap)
    free = capacity - sum(p for _, p in held)
    clock = now
    etas: dict[JobId, float | None] = {}
    for job in ordered[: max(depth, 0)]:
        need = job.pes
        if need > largest_wafer:
            etas[job.id] = None
            continue
        while free < need and heap:
            end, pes = heapq.heappop(heap)
            clock = max(clock, end)
            free += pes
        if free < need:
            etas[job.id] = None
            continue
        start = clock
        if reservation is not None and reservation.job_id == job.id:
            start = reservation.start_time
        etas[job.id] = start
        heapq.heappush(heap, (start + job.time_limit_s, need))
        free -= need
    return etas
