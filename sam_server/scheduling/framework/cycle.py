"""`CycleState`: everything one cycle changes while its plan is built (never outlives `plan`).

The framework owns it: the free space of every wafer (now, and with each reservation blocked),
the rectangles held and when they end, the quota ledger and the decisions so far. Plugins read
it and change it only through its methods (`start`, `stop_for`, `add_reservation`), which keep
every view of the free space in step.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sam_domain.geometry import Rect
from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.framework.profile import CycleArgs, Profile
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.layers import Layer, add_layer, occupy_everywhere
from sam_server.scheduling.migration import MigrationChoice
from sam_server.scheduling.model import (
    JobId,
    PolicyJob,
    PolicyWafer,
    Preempt,
    Reservation,
    Snapshot,
    Start,
)
from sam_server.scheduling.placement import FitIndex
from sam_server.scheduling.preemption import Held, PreemptionChoice
from sam_server.scheduling.quota import QuotaLedger
from sam_server.scheduling.reservation import TimedRect


@dataclass
class CycleState:
    """The mutable state of one plan while it is built."""

    snapshot: Snapshot
    now: float
    profile: Profile
    spaces: list[FreeSpace | None]
    """Each wafer's free space now (None: offline, or every worker slot taken)."""
    ledger: QuotaLedger
    held: list[list[Held]]
    """Each wafer's held rectangles, with the running job holding each (None: a start, a move)."""
    ends: list[list[TimedRect]]
    """Each wafer's held rectangles with the time each is expected free."""
    starts: list[Start] = field(default_factory=list)
    preemptions: list[Preempt] = field(default_factory=list)
    preempting: dict[JobId, list[JobId]] = field(default_factory=dict)
    """The jobs stops were planned for, and their victims."""
    preempt_reservation: Reservation | None = None
    reservations: list[Reservation] = field(default_factory=list)
    layers: list[Layer] = field(default_factory=list)
    fit_now: FitIndex | None = None
    tried: set[str] = field(default_factory=set)
    """Plugins that used their one attempt of this cycle (`first_try`)."""
    reserve_attempts: int = 0
    lowest_running_rank: int = len(CLASS_RANK)
    pending: list[PolicyJob] = field(default_factory=list)
    """The walk: the pending jobs in the order they are tried."""
    by_size: list[tuple[int, int]] | None = None
    """(PEs, index into `pending`), smallest first: built when a plugin first asks."""

    @classmethod
    def of(cls, snapshot: Snapshot, now: float, profile: Profile) -> CycleState:
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
            ends.append([TimedRect(r, end_of(j)) for r, j in zip(rects, running, strict=True)])
            usable = wafer.online and not slots_full(wafer, len(rects))
            spaces.append(FreeSpace.of(wafer.rows, wafer.cols, rects) if usable else None)
        ledger = QuotaLedger.of(snapshot.tenants, snapshot.jobs)
        state = cls(snapshot, now, profile, spaces, ledger, held, ends)
        ranks = [CLASS_RANK.get(j.priority_class, 1) for j in running_now]
        state.lowest_running_rank = min(ranks, default=len(CLASS_RANK))
        return state

    @property
    def args(self) -> CycleArgs:
        """The profile's framework arguments."""
        return self.profile.cycle

    @property
    def reservation(self) -> Reservation | None:
        """The top reservation (the preemptor's, or the earliest-starting one)."""
        if self.preempt_reservation is not None:
            return self.preempt_reservation
        return self.reservations[0] if self.reservations else None

    def first_try(self, name: str) -> bool:
        """True the first time a plugin asks in this cycle (it then makes its one attempt)."""
        if name in self.tried:
            return False
        self.tried.add(name)
        return True

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

    def allowed(self, job: PolicyJob) -> list[bool] | None:
        """Per wafer, whether the profile's filters let `job` run there (None: everywhere)."""
        mask: list[bool] | None = None
        for plugin in self.profile.filters:
            found = plugin.wafers(self, job)
            if found is not None:
                mask = (
                    found if mask is None else [a and b for a, b in zip(mask, found, strict=True)]
                )
        return mask

    def for_job(self, job: PolicyJob, spaces: list[FreeSpace | None]) -> list[FreeSpace | None]:
        """`spaces` with every wafer the filters rule out for `job` masked out (None)."""
        mask = self.allowed(job)
        if mask is None:
            return spaces
        return [s if ok else None for s, ok in zip(spaces, mask, strict=True)]

    def held_wafers(self, job: PolicyJob) -> list[tuple[int, int, list[Held]] | None]:
        """Each wafer's size and held rectangles, None for one `job` cannot use (offline, full,
        or ruled out by a filter): what preemption, drain stop and migration choose among."""
        mask = self.allowed(job)
        return [
            (w.rows, w.cols, self.held[i])
            if self.spaces[i] is not None and (mask is None or mask[i])
            else None
            for i, w in enumerate(self.snapshot.wafers)
        ]

    def start(self, job: PolicyJob, wafer_index: int, row: int, col: int) -> None:
        """Record a start (in `job`'s shape) and take its rectangle out of every view."""
        rect = (row, col, job.rows, job.cols)
        space = self.spaces[wafer_index]
        assert space is not None
        occupy_everywhere(self.layers, space, wafer_index, rect)
        self.fit_now = None
        self.ledger.add(job)
        self.held[wafer_index].append(Held(rect, None))
        self.ends[wafer_index].append(TimedRect(rect, self.now + job.time_limit_s))
        wafer = self.snapshot.wafers[wafer_index]
        self.starts.append(Start(job.id, wafer.id, row, col, job.rows, job.cols))
        if slots_full(wafer, len(self.held[wafer_index])):  # every worker slot is now taken
            self.spaces[wafer_index] = None
            for layer in self.layers:
                layer.spaces[wafer_index], layer.fit = None, None

    def stop_for(self, job: PolicyJob, choice: PreemptionChoice, reasons: list[str]) -> None:
        """Plan the stops of `choice`'s victims (one reason each) and hold their place for
        `job`."""
        for victim, reason in zip(choice.victims, reasons, strict=True):
            self.preemptions.append(Preempt(victim.id, job.id, reason))
        self.preempting[job.id] = [v.id for v in choice.victims]
        wafer = self.snapshot.wafers[choice.wafer_index]
        self.preempt_reservation = Reservation(
            job.id, wafer.id, choice.row, choice.col, job.rows, job.cols, self.now
        )

    def add_reservation(self, res: Reservation, wafer_index: int) -> None:
        """Hold `res`'s rectangle from its start: later jobs start around it or end before."""
        self.reservations.append(res)
        self.reservations.sort(key=lambda r: (r.start_time, str(r.job_id)))
        rect: Rect = (res.row, res.col, res.rows, res.cols)
        add_layer(self.layers, self.spaces, wafer_index, rect, res.start_time)

    def move(self, job: PolicyJob, choice: MigrationChoice) -> None:
        """Plan `choice`'s move of a running job so that `job` starts in its old place now:
        the moved job's old rectangle goes to `job`, its target is held, and both wafers' free
        space is rebuilt, so nothing else this cycle lands on either."""
        moved, wafers = choice.job, self.snapshot.wafers
        to = (wafers[choice.to_index].id, *choice.to_rect)
        reason = f"migrated to {to[0]} at ({to[1]}, {to[2]}) so that job {job.id} can start"
        self.preemptions.append(Preempt(moved.id, job.id, reason, to))
        self.preempting[job.id] = [moved.id]
        held = self.held[choice.from_index]
        old = next(h.rect for h in held if h.job is moved)
        new: Rect = (choice.row, choice.col, choice.rows, choice.cols)
        self.held[choice.from_index] = [h for h in held if h.job is not moved]
        self.held[choice.from_index].append(Held(new, None))
        self.held[choice.to_index].append(Held(choice.to_rect, None))
        for i in {choice.from_index, choice.to_index}:
            w = wafers[i]
            full = slots_full(w, len(self.held[i]))  # the move may take a wafer's last slot
            self.spaces[i] = (
                None if full else FreeSpace.of(w.rows, w.cols, [h.rect for h in self.held[i]])
            )
        ends = [t for t in self.ends[choice.from_index] if t.rect != old]
        ends.append(TimedRect(new, self.now + job.time_limit_s))
        self.ends[choice.from_index] = ends
        self.ends[choice.to_index].append(TimedRect(choice.to_rect, self.now + moved.time_limit_s))
        self.fit_now = None
        wafer = wafers[choice.wafer_index]
        self.preempt_reservation = Reservation(
            job.id, wafer.id, choice.row, choice.col, choice.rows, choice.cols, self.now
        )

    def just_stopped(self, job: PolicyJob) -> bool:
        """A job preempted less than `min_run_before_preempt_s` ago (it is not put first as the
        oldest: it was stopped for another job, which would otherwise lose the space it was
        freed for to it at once)."""
        at = job.last_preempted_at
        return at is not None and self.now - at < self.args.min_run_before_preempt_s

    def waiting_sized(self, low: int, high: int, but: JobId | None = None) -> bool:
        """Whether a job of this cycle's walk with `low` to `high` PEs, other than `but`, is
        still waiting (not started this cycle).

        The walk's jobs are sorted by size once per cycle (on the first call); a call finds
        `low` by bisection and skips only the jobs of that size range that started this cycle,
        so it costs O(log queue + starts), not O(queue)."""
        if self.by_size is None:
            self.by_size = sorted((j.work_pes or j.pes, i) for i, j in enumerate(self.pending))
        by_size = self.by_size
        started = self.started()
        for at in range(bisect.bisect_left(by_size, (low, -1)), len(by_size)):
            size, i = by_size[at]
            if size > high:
                return False
            other = self.pending[i].id
            if other != but and other not in started:
                return True
        return False

    def started(self) -> set[JobId]:
        """The jobs started so far this cycle."""
        return {s.job_id for s in self.starts}


def slots_full(wafer: PolicyWafer, regions: int) -> bool:
    """The wafer's worker runs `max_jobs` regions at once: no more may be placed on it."""
    return wafer.max_jobs is not None and regions >= wafer.max_jobs


def end_of(job: PolicyJob | None) -> float:
    """When a running job is expected to end (its time limit); inf for an unknown holder."""
    if job is None or job.started_at is None:
        return float("inf")
    return job.started_at + job.time_limit_s
