"""Trace replay: a simulated cluster of wafers in simulated time, driven by `policy.plan`.

At every arrival or completion the simulator builds a `Snapshot` and calls the same `plan` the
live controller loop (`sam_server.controller`) calls, then applies its starts and preemptions.
A job holds its rectangle for its real run time (the trace's run time); the policy only knows
the time limit (the trace's requested time, or the run time when unknown). Every trace user
becomes a tenant.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sam_domain.geometry import Rect
from sam_domain.jobs import CLASS_RANK
from sam_server.replay.metrics import SimResult, summarize
from sam_server.replay.swf import TraceJob, shape_for_pes
from sam_server.scheduling.fairshare import update_usage
from sam_server.scheduling.framework.profile import Profile
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.model import (
    Allocation,
    JobId,
    PolicyConfig,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    Snapshot,
    TenantState,
)
from sam_server.scheduling.placement import FitIndex
from sam_server.scheduling.plugins import Drain, Fit, Preempt
from sam_server.scheduling.policy import plan
from sam_server.scheduling.profiles import profile_for, usage_half_life_s
from sam_server.scheduling.shapes import flexible_shapes, shrunk_shapes


@dataclass(frozen=True)
class ClusterSpec:
    """The simulated cluster: `wafers` wafers of rows x cols PEs; a trace processor = K PEs.

    No default size: the caller passes the fabric (`sam sim` takes a whole WSE-2's from
    `sam_server.config.arch_grid`, as the cluster file does, i.e. from the simulator's arch
    table), so the policy package neither imports the simulator nor retypes its numbers."""

    wafers: int
    rows: int
    cols: int
    pes_per_proc: int = 1
    mold_shrink: float = 0.0
    """Moldable trace jobs (an experiment, off by default): a job may start on up to this
    fraction fewer PEs, running work_pes / area times longer (its slowdown counts the stretch).
    Live jobs never shrink, so the default keeps `sam sim` to what the live policy can do."""


@dataclass
class _Running:
    job: PolicyJob
    wafer: int
    alloc: Allocation
    end: float


@dataclass
class _State:
    """The simulated cluster's mutable state (local to one replay)."""

    spec: ClusterSpec
    config: PolicyConfig
    profile: Profile
    trace: dict[int, TraceJob]
    pending: dict[int, PolicyJob] = field(default_factory=dict)
    running: dict[int, _Running] = field(default_factory=dict)
    remaining: dict[int, float] = field(default_factory=dict)
    first_start: dict[int, float] = field(default_factory=dict)
    finish: dict[int, float] = field(default_factory=dict)
    completions: list[tuple[float, int]] = field(default_factory=list)
    usage: dict[str, float] = field(default_factory=dict)
    usage_clock: float = 0.0
    preemptions: int = 0
    migrations: int = 0
    lost_s: float = 0.0
    users: tuple[str, ...] = ()
    asked: dict[int, PolicyJob] = field(default_factory=dict)
    held_shape: dict[int, tuple[int, int]] = field(default_factory=dict)


def _snapshot(state: _State) -> Snapshot:
    """The policy's view of the simulated cluster."""
    allocs: list[list[Allocation]] = [[] for _ in range(state.spec.wafers)]
    for run in state.running.values():
        allocs[run.wafer].append(run.alloc)
    wafers = tuple(
        PolicyWafer(f"w{i}", state.spec.rows, state.spec.cols, True, tuple(a))
        for i, a in enumerate(allocs)
    )
    tenants = {
        u: TenantState(
            PolicyQuota(),
            state.usage.get(u, 0.0),
            {u: state.usage.get(u, 0.0)},
        )
        for u in state.users
    }
    jobs = tuple(r.job for r in state.running.values()) + tuple(state.pending.values())
    return Snapshot(wafers, tenants, jobs, 0, state.config)


def _charge_usage(state: _State, now: float) -> None:
    """Decay every tenant's usage to `now` and add the PE-seconds its running jobs held."""
    dt = now - state.usage_clock
    if dt <= 0:
        return
    held: dict[str, int] = {}
    for run in state.running.values():
        held[run.job.tenant] = held.get(run.job.tenant, 0) + run.job.pes
    half_life = usage_half_life_s(state.profile)
    for tenant in set(state.usage) | set(held):
        old = state.usage.get(tenant, 0.0)
        state.usage[tenant] = update_usage(old, held.get(tenant, 0), dt, half_life)
    state.usage_clock = now


CHECKPOINT_EVERY_S = 1800.0
"""A trace job checkpoints this often (the steps since its last checkpoint are lost on a move)."""
MOVE_COST_S = 120.0
"""Checkpoint, release and restart elsewhere: charged to a migrated job's remaining time."""


def _migrate(state: _State, job_id: int, to: tuple[str, int, int, int, int], now: float) -> None:
    """Move a running job: it restarts at `to` from its last checkpoint, after MOVE_COST_S.

    Lost: the work since its last periodic checkpoint (its run so far modulo
    CHECKPOINT_EVERY_S). The policy sees it as started when its kept work began (so its time
    limit still bounds its end), moved once more (`preempt_count`, `last_preempted_at`).
    """
    run = state.running[job_id]
    ran = now - run.job.started_at if run.job.started_at is not None else 0.0
    lost = ran % CHECKPOINT_EVERY_S
    end = run.end + lost + MOVE_COST_S
    wafer_id, row, col, rows, cols = to
    alloc = Allocation(job_id, run.job.tenant, row, col, rows, cols)
    moved = replace(
        run.job,
        rows=rows,
        cols=cols,
        started_at=now + MOVE_COST_S - (ran - lost),
        preempt_count=run.job.preempt_count + 1,
        last_preempted_at=now,
    )
    state.running[job_id] = _Running(moved, int(wafer_id[1:]), alloc, end)
    state.held_shape[job_id] = (rows, cols)
    state.migrations += 1
    state.lost_s += lost + MOVE_COST_S
    heapq.heappush(state.completions, (end, job_id))


def _stop(state: _State, job_id: int, now: float, for_job: JobId) -> None:
    """Preempt a running job for `for_job`: it checkpoints and goes back to pending in its
    asked shape, naming the job it was stopped for (`PolicyJob.stopped_for`), as the live
    system's `Job.preempted_for` does."""
    run = state.running.pop(job_id)
    stretch = run.job.limit_in(run.job.rows, run.job.cols) / run.job.time_limit_s
    # from its checkpoint, plus the checkpoint and restart
    state.remaining[job_id] = max(0.0, run.end - now) / stretch + MOVE_COST_S
    state.lost_s += MOVE_COST_S
    state.pending[job_id] = replace(
        state.asked[job_id],  # back to its asked shape and alternatives
        state="pending",
        started_at=None,
        preempt_count=run.job.preempt_count + 1,
        last_preempted_at=now,
        stopped_for=for_job,
    )  # eligible since it first was, as the live system keeps it (its seniority stays)
    state.preemptions += 1


def _apply(state: _State, now: float) -> None:
    """Run planning cycles at `now` until one asks for no migration or preemption, carrying out
    every move and stop each asks for, as the live controller does cycle after cycle; then
    start what the last one starts (the jobs they made room for among them).

    The loop ends: each move or stop counts against the job's `max_preemptions_per_job`."""
    decided = plan(_snapshot(state), now, explain=False, profile=state.profile)
    while decided.preemptions:
        for pre in decided.preemptions:
            if pre.to is not None:
                _migrate(state, int(pre.job_id), pre.to, now)
            else:
                _stop(state, int(pre.job_id), now, pre.for_job_id)
        decided = plan(_snapshot(state), now, explain=False, profile=state.profile)
    for s in decided.starts:
        job_id = int(s.job_id)
        job = state.pending.pop(job_id)
        limit = job.limit_in(s.rows, s.cols)
        end = now + state.remaining[job_id] * limit / job.time_limit_s
        alloc = Allocation(job_id, job.tenant, s.row, s.col, s.rows, s.cols)
        started = replace(
            job, state="running", started_at=now, rows=s.rows, cols=s.cols, time_limit_s=limit
        )
        state.held_shape[job_id] = (s.rows, s.cols)
        state.running[job_id] = _Running(started, int(s.wafer_id[1:]), alloc, end)
        state.first_start.setdefault(job_id, now)
        heapq.heappush(state.completions, (end, job_id))


def _complete_until(state: _State, now: float) -> None:
    """End every running job whose end time is at or before `now`."""
    while state.completions and state.completions[0][0] <= now:
        end, job_id = heapq.heappop(state.completions)
        run = state.running.get(job_id)
        if run is None or run.end != end:
            continue  # preempted; its new run has its own completion
        del state.running[job_id]
        state.finish[job_id] = end


def _could_start(state: _State) -> bool:
    """Whether a cycle now could start or preempt anything (else it is skipped: same result).

    Nothing ended since the last cycle, so free space only shrank: a cycle can only act if some
    pending job fits the free space now, or outranks a running job by class (preemption), or
    (with `suspend_factor` or `drain_stop_share`) might stop one of its class.
    """
    allocs: list[list[Rect]] = [[] for _ in range(state.spec.wafers)]
    for run in state.running.values():
        a = run.alloc
        allocs[run.wafer].append((a.row, a.col, a.rows, a.cols))
    index = FitIndex([FreeSpace.of(state.spec.rows, state.spec.cols, a) for a in allocs])
    profile = state.profile
    flexible = profile.cycle.flexible
    fit = profile.find("fit")
    preempt = profile.find("preempt")
    drain = profile.find("drain")
    pending = state.pending.values()
    if any(index.fits(*shape) for j in pending for shape in j.candidate_shapes(flexible)):
        return True
    if (
        flexible and isinstance(fit, Fit) and fit.args.cut_to_fit
    ):  # (a job may start in a shape cut to the space)
        if any(j.cut_bounds and index.cut_shapes(*j.cut_bounds) for j in pending):
            return True
    if not isinstance(preempt, Preempt) or not state.running:
        return False
    if preempt.args.suspend_factor > 0 or (isinstance(drain, Drain) and drain.args.share > 0):
        return True  # a waiting job's slowdown grows, a running one's run: it may stop one now
    lowest = min(CLASS_RANK[r.job.priority_class] for r in state.running.values())
    return any(CLASS_RANK[j.priority_class] > lowest for j in state.pending.values())


def _job_of(t: TraceJob, shape: tuple[int, int], spec: ClusterSpec) -> PolicyJob:
    """The policy's job for a trace job: its compiler shape, and the flexible alternatives."""
    pes = t.procs * spec.pes_per_proc
    alternatives = (
        (shape[1], shape[0]),
        *flexible_shapes(pes, spec.rows, spec.cols),
        *shrunk_shapes(pes, spec.rows, spec.cols, spec.mold_shrink),
    )
    fitting = tuple(s for s in alternatives if s[0] <= spec.rows and s[1] <= spec.cols)
    return PolicyJob(
        t.id,
        t.user,
        t.user,
        "normal",
        "pending",
        t.submit_s,
        t.submit_s,
        shape[0],
        shape[1],
        t.time_limit_s,
        shapes=fitting,
        work_pes=pes,
    )


def simulate(
    trace: Sequence[TraceJob],
    spec: ClusterSpec,
    config: PolicyConfig,
    policy_name: str = "",
    profile: Profile | None = None,
) -> SimResult:
    """Replay `trace` on the cluster `spec` under `profile` (else the one `config` stands for);
    metrics of the replayed jobs.

    Jobs whose PE count can never fit a wafer are rejected at submit (as the API does) and
    counted in `rejected`, not replayed.
    """
    state = _State(spec, config, profile or profile_for(config), {})
    arrivals: list[tuple[TraceJob, tuple[int, int]]] = []
    rejected = 0
    for t in trace:
        shape = shape_for_pes(t.procs * spec.pes_per_proc, spec.rows, spec.cols)
        if shape is None:
            rejected += 1
            continue
        arrivals.append((t, shape))
        state.trace[t.id] = t
        state.remaining[t.id] = t.run_s
    state.users = tuple(sorted({t.user for t in state.trace.values()}))
    state.usage_clock = arrivals[0][0].submit_s if arrivals else 0.0
    i = 0
    while i < len(arrivals) or state.completions:
        next_arrival = arrivals[i][0].submit_s if i < len(arrivals) else float("inf")
        next_end = state.completions[0][0] if state.completions else float("inf")
        now = min(next_arrival, next_end)
        _charge_usage(state, now)
        ended = len(state.finish)
        _complete_until(state, now)
        while i < len(arrivals) and arrivals[i][0].submit_s <= now:
            t, shape = arrivals[i]
            state.pending[t.id] = state.asked[t.id] = _job_of(t, shape, spec)
            i += 1
        if state.pending and (len(state.finish) > ended or _could_start(state)):
            _apply(state, now)
    return summarize(
        state.trace,
        state.held_shape,
        state.first_start,
        state.finish,
        spec,
        rejected,
        state.preemptions,
        policy_name,
        state.migrations,
        state.lost_s,
    )
