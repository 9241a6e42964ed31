"""The policy's input (`Snapshot`, `PolicyConfig`) and output (`Plan`): plain frozen dataclasses.

The controller (`sam_server.controller`) builds a `Snapshot` from the database, the trace replay
(`sam sim`, `sam_server.replay`) builds one from its simulated cluster, and both hand it to
`policy.plan(snapshot, now)`. Nothing here touches a database, a broker or a clock: every time is
a float of seconds passed in by the caller (epoch seconds live, simulated seconds in `sam sim`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from sam_domain.jobs import (
    CLASS_RANK as CLASS_RANK,  # re-exported: the policy's modules read it here
)
from sam_domain.jobs import PriorityClass
from sam_server.scheduling.shapes import MAX_ASPECT

JobId = int | str
"""A job's id. All ids in one snapshot must be of one type (they are sorted for tie-breaks)."""

JobState = Literal["queued", "compiling", "pending", "running"]


@dataclass(frozen=True)
class Allocation:
    """A rectangle of a wafer held by a running job: rows [row, row+rows), cols [col, col+cols)."""

    job_id: JobId
    tenant: str
    row: int
    col: int
    rows: int
    cols: int


@dataclass(frozen=True)
class PolicyWafer:
    """One wafer's PE grid (rows x cols), the regions allocated on it, and its arch ("wse2",
    "wse3"; None in traces, where every job may use every wafer)."""

    id: str
    rows: int
    cols: int
    online: bool = True
    allocations: tuple[Allocation, ...] = ()
    arch: str | None = None
    max_jobs: int | None = None  # regions the wafer's worker can run at once (None: no limit)


@dataclass(frozen=True)
class PolicyQuota:
    """A tenant's limits (None = no limit) and fair-share weight, as in docs/contract.md section 2."""

    max_pes: int | None = None
    max_running_jobs: int | None = None
    max_queued_jobs: int | None = None
    share: float = 1.0


@dataclass(frozen=True)
class TenantState:
    """A tenant's quota and its decayed usage in PE-seconds (total and per user)."""

    quota: PolicyQuota = field(default_factory=PolicyQuota)
    usage_pe_s: float = 0.0
    user_usage_pe_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyJob:
    """A job that is not yet terminal. `rows` x `cols` is the region shape the job needs.

    `eligible_at` is when the job became eligible to run (age accrues from it); `started_at` is
    set for running jobs (when the current run began: a resumed job's restart); `time_limit_s`
    is the wall-time limit used for reservations.
    `arch` is the wafer arch the job was compiled for ("wse2", "wse3"): it runs only on a wafer
    of that arch (None: any wafer).
    """

    id: JobId
    tenant: str
    user: str
    priority_class: PriorityClass
    state: JobState
    submitted_at: float
    eligible_at: float
    rows: int
    cols: int
    time_limit_s: float
    started_at: float | None = None
    preempt_count: int = 0
    last_preempted_at: float | None = None
    stopped_for: JobId | None = None
    """The job this one was last preempted (suspended) for: it goes first in the walk right
    after the stop, so it gets the region it freed."""
    preemptible: bool = True
    arch: str | None = None
    shapes: tuple[tuple[int, int], ...] = ()
    """A flexible job's other acceptable (rows, cols) shapes; () = only rows x cols."""
    work_pes: int = 0
    """The PEs its time limit is for (0: its asked shape's). A shape of fewer PEs (a moldable
    job's, see `shapes.shrunk_shapes`) runs work_pes / area times longer."""

    def limit_in(self, rows: int, cols: int) -> float:
        """The time limit in a rows x cols shape: stretched when it has fewer than work_pes."""
        if self.work_pes <= rows * cols:
            return self.time_limit_s
        return self.time_limit_s * self.work_pes / (rows * cols)

    @property
    def pes(self) -> int:
        """PEs the job holds when running."""
        return self.rows * self.cols

    def candidate_shapes(self, flexible: bool = True) -> tuple[tuple[int, int], ...]:
        """The asked shape first, then (when `flexible`) the alternatives, without repeats."""
        if not flexible or not self.shapes:
            return ((self.rows, self.cols),)
        return self._all_shapes

    @cached_property
    def cut_bounds(self) -> tuple[int, float] | None:
        """(PEs, aspect bound) of the shapes a flexible job may take cut to the free space
        (`shapes.free_space_shapes`), None for a rigid job: its PEs (work_pes, else its asked
        shape's) and the largest aspect among the shapes it accepts, at most shapes.MAX_ASPECT
        (so never beyond the job's own bound)."""
        if not self.shapes:
            return None
        aspect = max(max(r, c) / min(r, c) for r, c in self.shapes)
        return (self.work_pes or self.pes, min(aspect, MAX_ASPECT))

    @cached_property
    def _all_shapes(self) -> tuple[tuple[int, int], ...]:
        # computed once per job object: every cycle asks it for each waiting job, several times
        asked = (self.rows, self.cols)
        return (asked, *(s for s in self.shapes if s != asked))


def arch_matches(wafer: PolicyWafer, job: PolicyJob) -> bool:
    """Whether `job` may run on `wafer`: same arch, or either side does not say."""
    return job.arch is None or wafer.arch is None or wafer.arch == job.arch


@dataclass(frozen=True)
class PriorityWeights:
    """Weights of the priority factors (each factor is in [0, 1]); higher total runs sooner."""

    priority_class: float = 10000.0
    fair_share: float = 5000.0
    age: float = 1000.0
    size: float = 500.0


@dataclass(frozen=True)
class PolicyConfig:
    """Knobs of the policy. The defaults are SAM's policy; `fcfs_config`/`easy_config` the anchors.

    - ordering: "priority" (weighted sum) or "fifo" (submit time).
    - placement: "best_fit" (fragmentation-aware over maximal empty rectangles) or "first_fit".
    - backfill: reserve a rectangle for the top blocked job and backfill around it (EASY);
      False means strict order: nothing starts behind a blocked job.
    - favor_small: the size factor favours short jobs, by time limit (True), or large PE counts.
    - size_horizon_s: the time scale of the size factor (a time limit this long or longer
      scores 0).
    - user_share_weight: how much the user's share within the tenant moves the fair-share factor.
    - reserve_after_s: only a job that has been eligible this long gets the reservation (as
      Slurm's bf_min_age_reserve): a small job blocked for a moment does not take it from a
      large job that has waited; 0 is classic EASY (the first blocked job reserves).
    - eta_depth: ETAs are estimated for this many jobs at the head of the queue (others None).
    - flexible: a job with alternative `shapes` may start in whichever fits the free space best
      (False: only its asked shape, as the anchors do).
    - reservations: how many blocked jobs get a reservation (1 = EASY, more = conservative
      backfill for the top k); a job only starts now if it ends before, or stays out of, every
      reservation that starts before it would end.
    - protect_oldest: this many longest-waiting jobs of the top class present go first in the
      walk (they start, or take the first reservations), which bounds their wait as EASY does.
    - migration: the first blocked job may start now by moving one running checkpointing job
      elsewhere (see `migration`); bounded per job with preemptions (`max_preemptions_per_job`).
    - migrate_min_gain_s: a move is made only if the blocked job would otherwise wait this long.
    - cut_to_fit: a flexible job none of whose usual shapes fits now may start in a shape cut
      to a free maximal rectangle (flush with its height or width, at least the job's PEs,
      within the aspect and waste bounds: `shapes.free_space_shapes`); its decisions where a
      usual shape fits do not change. Needs `flexible`.
    - cut_reserve: with `cut_to_fit`, a blocked flexible job's reservation may take a shape
      cut to the free space at the time it starts, when that is earlier than any usual shape's.
    - suspend_factor: selective suspension: the first blocked job whose bounded slowdown so
      far is this multiple of a running job's of the same class (and whose time limit is
      shorter than what that job has left) may preempt it (checkpoint, back to pending), within
      the preemption protections (`min_run_before_preempt_s`, `max_preemptions_per_job`);
      0 = off (then only a higher class preempts).
    - suspend_max: a job already preempted this many times is not suspended (stopped for a
      job of its own class) again but past `suspend_again_factor`'s higher bar, so a big job is
      not sent back over and over; 0 = only `max_preemptions_per_job` bounds it.
    - suspend_again_factor: a job stopped `suspend_max` times already is suspended again
      (still within `max_preemptions_per_job`) only for a job whose slowdown so far is this
      multiple of the usual bar (`suspend_factor` x this x the victim's: 100x at the
      defaults): the small jobs that wait hundreds of times their run behind a whole-wafer
      job that was stopped once before (NASA at 6 PEs per processor); 0 = never.
    - requeue_stopped: a stopped (preempted) job's seniority as the oldest counts from when it
      was stopped, not from when it became eligible: it had its turn, and its return does not
      take the first reservation from the jobs that waited longest without starting.
    - lookahead: look-ahead placement (0 = off): a flexible job of at most a third of a wafer
      that lands on a wafer with room for at most `lookahead` + 1 jobs like it, while no
      smaller job waits, goes where the most further jobs of its size still fit (up to
      `lookahead` of them, each in one of its shapes or one cut flush to the free space:
      `placement.lookahead_placement`). 3 forms the pinwheel of four quarter jobs on 23x34
      from an empty wafer; 2 (the default) looks at fewer placements.
    - lookahead_pairs: look-ahead placement also for a job of more than a third of a wafer
      while another job of about its size (0.8-1.25x its PEs) waits and no smaller one does: it
      goes where that job still fits beside it (two half-wafer jobs side by side, 23x17 +
      23x17 on 23x34, instead of one in 16x24 and the other waiting it out).
    - drain_stop_share: drain stop: when the first blocked job (the oldest, as a rule) needs at
      least `drain_stop_min_job` of a wafer, no migration lets it start, and the running jobs
      in its way hold at most this share of its PEs, those jobs (of its class or lower, each
      with at least `drain_stop_min_left_s` left, never one stopped `suspend_max` times) are
      stopped (checkpoint, back to pending) and it starts now, instead of the wafer idling
      while the last few run out; 0 = off. Within the preemption protections
      (`min_run_before_preempt_s`, `max_preemptions_per_job`).
    - drain_stop_min_job: the least share of a wafer a job needs for a drain stop.
    - drain_stop_min_left_s: a running job with less time left than this is waited for.
    """

    weights: PriorityWeights = field(default_factory=PriorityWeights)
    half_life_s: float = 7 * 86400.0
    age_cap_s: float = 7 * 86400.0
    ordering: Literal["priority", "fifo"] = "priority"
    placement: Literal["best_fit", "first_fit"] = "best_fit"
    backfill: bool = True
    favor_small: bool = True
    size_horizon_s: float = 86400.0
    user_share_weight: float = 0.25
    preemption: bool = True
    min_run_before_preempt_s: float = 600.0
    max_preemptions_per_job: int = 3
    reserve_after_s: float = 600.0
    eta_depth: int = 100_000
    flexible: bool = True
    reservations: int = 2
    protect_oldest: int = 1
    migration: bool = True
    migrate_min_gain_s: float = 1800.0
    cut_to_fit: bool = True
    cut_reserve: bool = True
    suspend_factor: float = 10.0
    suspend_max: int = 1
    suspend_again_factor: float = 10.0
    requeue_stopped: bool = True
    lookahead: int = 2
    lookahead_pairs: bool = True
    drain_stop_share: float = 0.5
    drain_stop_min_job: float = 0.5
    drain_stop_min_left_s: float = 1800.0


@dataclass(frozen=True)
class Snapshot:
    """Everything the policy may look at: wafers, tenants, jobs not terminal, free compile slots."""

    wafers: tuple[PolicyWafer, ...]
    tenants: dict[str, TenantState]
    jobs: tuple[PolicyJob, ...]
    compile_slots_free: int = 0
    config: PolicyConfig = field(default_factory=PolicyConfig)
    # Compiles one tenant may have in flight at once (0 = no limit besides the free slots).
    compile_slots_per_tenant: int = 0


@dataclass(frozen=True)
class Start:
    """Start `job_id` in the rectangle (row, col, rows, cols) of wafer `wafer_id`."""

    job_id: JobId
    wafer_id: str
    row: int
    col: int
    rows: int
    cols: int


@dataclass(frozen=True)
class Preempt:
    """Stop `job_id` (checkpoint, back to pending) so that `for_job_id` can start."""

    job_id: JobId
    for_job_id: JobId
    reason: str
    to: tuple[str, int, int, int, int] | None = None
    """A migration: where the job restarts (wafer id, row, col, rows, cols); None: preemption."""


@dataclass(frozen=True)
class Reason:
    """Why a job waits: a code from `reasons.REASON_CODES` and a message a user can act on."""

    code: str
    message: str


@dataclass(frozen=True)
class PriorityBreakdown:
    """The total priority and each factor's value in [0, 1] (`weighted` = weight x factor)."""

    total: float
    factors: dict[str, float]
    weighted: dict[str, float]


@dataclass(frozen=True)
class JobExplain:
    """A waiting job's 1-based queue position, priority, every reason it waits and its ETA."""

    position: int
    priority: PriorityBreakdown
    reasons: tuple[Reason, ...]
    eta: float | None


@dataclass(frozen=True)
class Reservation:
    """The rectangle held for the top blocked job from `start_time` on."""

    job_id: JobId
    wafer_id: str
    row: int
    col: int
    rows: int
    cols: int
    start_time: float
    time_limit_s: float = 0.0
    """How long the reserved job may hold the rectangle (later reservations avoid it till then)."""


@dataclass(frozen=True)
class WaferMetrics:
    """A wafer after this plan's starts: free PEs, largest free rectangle, fragmentation.

    fragmentation = 1 - area(largest free rectangle) / free PEs (0 when nothing is free).
    """

    wafer_id: str
    free_pes: int
    largest_free_rect: tuple[int, int]
    fragmentation: float


@dataclass(frozen=True)
class Plan:
    """The decisions of one planning cycle. `order` lists every waiting job in queue order."""

    compiles: list[JobId]
    starts: list[Start]
    preemptions: list[Preempt]
    waiting: dict[JobId, JobExplain]
    reservation: Reservation | None
    wafer_metrics: dict[str, WaferMetrics]
    order: list[JobId]
    reservations: list[Reservation] = field(default_factory=list)
    """Every reservation of this plan (conservative backfill), earliest start first."""


def fcfs_config() -> PolicyConfig:
    """First come first served with first-fit placement and no backfill (the Cerebras anchor):
    EASY without its backfill."""
    return replace(easy_config(), backfill=False)


def easy_config() -> PolicyConfig:
    """EASY backfill in submit order with first-fit placement (the Slurm-like anchor)."""
    return PolicyConfig(
        ordering="fifo",
        placement="first_fit",
        backfill=True,
        preemption=False,
        reserve_after_s=0.0,
        flexible=False,
        reservations=1,
        protect_oldest=0,
        migration=False,
        suspend_factor=0.0,
    )
