"""Build the policy's `Snapshot` from the database."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import literal_column, select, text
from sqlalchemy.orm import Session

from sam_domain.jobs import PriorityClass
from sam_server.db.models import CompileServer, Job, JobAttempt, Tenant, User, Wafer
from sam_server.db.types import as_utc
from sam_server.scheduling import (
    Allocation,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    Snapshot,
    TenantState,
)
from sam_server.scheduling.fairshare import decay_usage
from sam_server.scheduling.model import JobState as PolicyState
from sam_server.scheduling.shapes import flexible_shapes
from sam_server.services.jobs import job_arch
from sam_server.services.observe import wafer_online
from sam_server.states import ACTIVE, HOLDS_REGION, JobState


def _ts(value: datetime | None) -> float | None:
    value = as_utc(value)
    return value.timestamp() if value is not None else None


# The columns the cycle reads of every active job; the spec is read once per job (it never
# changes) and only what the policy needs of it is kept, in _DERIVED.
_COLUMNS = (
    Job.id,
    Job.state,
    Job.tenant_id,
    Job.user_id,
    Job.priority,
    Job.mode,
    Job.created_at,
    Job.eligible_at,
    Job.started_at,
    Job.last_preempted_at,
    Job.preempted_for,
    Job.req_rows,
    Job.req_cols,
    Job.time_limit_s,
    Job.preempt_count,
    Job.attempts,
    Job.wafer_id,
    Job.region_row,
    Job.region_col,
    Job.region_rows,
    Job.region_cols,
    Job.compile_hash,
    Job.cancel_requested,
    Job.reason,
    # what controller.gates reads: holds, dependencies, arrays
    Job.name,
    Job.seq,
    Job.hold,
    Job.dependency,
    Job.kill_invalid_depend,
    Job.array_job_id,
    Job.array_task_id,
    Job.array_max_running,
)
_DERIVED: dict[tuple[str, str, int, int], tuple[bool, str | None, tuple[tuple[int, int], ...]]] = {}
_ACTIVE_STATES = tuple(s.value for s in ACTIVE)
_KEYS = tuple(c.key for c in _COLUMNS)
_STATE, _REASON = _KEYS.index("state"), _KEYS.index("reason")
FULL_RELOAD_S = 60.0
"""The cached rows are checked against a full read this often (a deleted row, an xid epoch)."""


class ActiveJob:
    """A non-terminal job as the planning cycle reads it: plain attributes, no ORM identity
    (loading 100,000 ORM objects with their tenant, user and JSON spec took most of a cycle).
    `tenant_name`, `user_name` and the spec-derived `preemptible`, `arch`, `shapes` are set by
    load_active_jobs; `policy` caches its policy job (see to_policy_job)."""

    __slots__ = (
        *_KEYS,
        "tenant_name",
        "user_name",
        "preemptible",
        "arch",
        "shapes",
        "row",
        "policy",
        "policy_state",
        "fresh",
        "run_started_at",
    )
    # (for the type checker; every column of _COLUMNS is an attribute)
    id: str
    state: str
    reason: str | None
    priority: PriorityClass  # the API admits no other
    mode: str
    created_at: datetime
    eligible_at: datetime | None
    started_at: datetime | None
    last_preempted_at: datetime | None
    preempted_for: str | None
    time_limit_s: int
    preempt_count: int
    wafer_id: str | None
    region_row: int | None
    region_col: int | None
    region_rows: int | None
    region_cols: int | None
    req_rows: int
    req_cols: int
    attempts: int
    tenant_id: int
    user_id: int
    tenant_name: str
    user_name: str
    preemptible: bool
    arch: str | None
    shapes: tuple[tuple[int, int], ...]

    def __init__(self, row: tuple[object, ...]) -> None:
        for key, value in zip(_KEYS, row, strict=True):
            setattr(self, key, value)
        self.row = row
        self.policy: PolicyJob | None = None
        self.policy_state: str | None = None
        self.fresh = True  # read this cycle (new or changed); False once reused unchanged
        # when its current attempt was placed, if it is a resumed one (see _run_starts)
        self.run_started_at: datetime | None = None

    def current(self, row: tuple[object, ...]) -> bool:
        """Whether this object still is `row` as read (the cycle may have set state/reason
        without committing them)."""
        return self.row == row and self.state == row[_STATE] and self.reason == row[_REASON]


@dataclass
class _JobCache:
    """One database's active jobs between cycles (the scheduler process plans every second;
    re-reading and converting 100,000 rows each time was most of a cycle)."""

    jobs: dict[str, ActiveJob] = field(default_factory=dict)
    names: tuple[dict[int, str], dict[int, str]] | None = None
    horizon: int | None = None  # PostgreSQL: every transaction below it was seen
    table: int | None = None  # PostgreSQL: the jobs table's file (a TRUNCATE makes a new one)
    full_at: float = 0.0


_CACHES: dict[str, _JobCache] = {}


def forget_active_jobs() -> None:
    """Drop the cached rows (a cycle that failed may have left them edited but not committed)."""
    _CACHES.clear()


def load_active_jobs(session: Session) -> list[ActiveJob]:
    """Every job that is not terminal, as ActiveJob rows.

    The rows are cached per database between calls. On PostgreSQL only the rows written since
    the last call are read: those whose `xmin` (the writing transaction) is at or above the
    oldest transaction still running when the last call read (`pg_snapshot_xmin`), so a
    transaction that commits late is still seen. SAM never deletes a job row; a TRUNCATE (tests,
    a restore) changes the table's file node and forces a full read, and every FULL_RELOAD_S a
    full read catches rows deleted by hand. On SQLite every row is read but an unchanged one keeps its object."""
    bind = session.get_bind()
    cache = _CACHES.setdefault(str(bind.engine.url), _JobCache())
    tenants = dict(session.execute(select(Tenant.id, Tenant.name)).all())
    users = dict(session.execute(select(User.id, User.name)).all())
    if cache.names != (tenants, users):  # a renamed tenant or user: rebuild every row
        cache.jobs, cache.names = {}, (tenants, users)
    horizon = table = None
    if bind.dialect.name == "postgresql":
        horizon, table = session.execute(_PG_HORIZON).one()
    now = time.monotonic()
    delta = (
        horizon is not None
        and cache.horizon is not None
        and horizon >> 32 == cache.horizon >> 32
        and horizon >= cache.horizon
        and table == cache.table
        and now - cache.full_at < FULL_RELOAD_S
    )
    fresh: list[ActiveJob] = []
    if delta:
        _read_delta(session, cache, fresh)
    else:
        known, cache.jobs, cache.full_at = cache.jobs, {}, now
        rows = session.execute(select(*_COLUMNS).where(Job.state.in_(_ACTIVE_STATES)))
        _merge(cache, known, (tuple(r) for r in rows), fresh)
    cache.horizon, cache.table = horizon, table
    jobs = list(cache.jobs.values())
    missing = [j for j in fresh if (j.id, j.mode, j.req_rows, j.req_cols) not in _DERIVED]
    for at in range(0, len(missing), 1000):
        batch = [j.id for j in missing[at : at + 1000]]
        for job_id, spec, mode, rows_, cols_ in session.execute(
            select(Job.id, Job.spec, Job.mode, Job.req_rows, Job.req_cols).where(Job.id.in_(batch))
        ):
            _DERIVED[(job_id, mode, rows_, cols_)] = _derive(spec, mode, rows_, cols_)
    if len(_DERIVED) > 4 * len(jobs) + 10_000:  # forget ended jobs now and then
        live = {(j.id, j.mode, j.req_rows, j.req_cols) for j in jobs}
        for key in [k for k in _DERIVED if k not in live]:
            del _DERIVED[key]
    for job in fresh:
        job.tenant_name = tenants.get(job.tenant_id, "")
        job.user_name = users.get(job.user_id, "")
        job.preemptible, job.arch, job.shapes = _DERIVED[(job.id, job.mode, *_req(job))]
    _run_starts(session, fresh)
    return jobs


def _run_starts(session: Session, fresh: list[ActiveJob]) -> None:
    """Set `run_started_at` of the resumed jobs among `fresh` that hold a region: when their
    current attempt was placed. `Job.started_at` is the first start (what a user is shown), but
    the policy's `started_at` is the current run's: the preemption protections count from the
    restart, and the worker gives each attempt the whole time limit (the time left)."""
    resumed = {j.id: j for j in fresh if j.state in HOLDS_REGION and j.attempts > 1}
    ids = list(resumed)
    for at in range(0, len(ids), 1000):
        rows = session.execute(
            select(JobAttempt.job_id, JobAttempt.attempt, JobAttempt.placed_at).where(
                JobAttempt.job_id.in_(ids[at : at + 1000])
            )
        )
        for job_id, attempt, placed_at in rows:
            job = resumed[job_id]
            if attempt == job.attempts:
                job.run_started_at = placed_at


def _read_delta(session: Session, cache: _JobCache, fresh: list[ActiveJob]) -> None:
    """Merge the rows written since the last read into the cache."""
    assert cache.horizon is not None
    known = cache.jobs
    for kept in known.values():
        kept.fresh = False
    for row in session.execute(select(*_COLUMNS).where(_XMIN >= cache.horizon & 0xFFFFFFFF)):
        values = tuple(row)
        if values[_STATE] not in _ACTIVE_STATES:
            known.pop(values[0], None)
            continue
        job = known.get(values[0])
        if job is None or not job.current(values):
            known[values[0]] = job = ActiveJob(values)
            fresh.append(job)


def _merge(
    cache: _JobCache,
    known: dict[str, ActiveJob],
    rows: Iterable[tuple[Any, ...]],
    fresh: list[ActiveJob],
) -> None:
    """Fill cache.jobs from a full read of the active rows, keeping unchanged objects."""
    for kept in known.values():
        kept.fresh = False
    for values in rows:
        job = known.get(values[0])
        if job is None or not job.current(values):
            job = ActiveJob(values)
            fresh.append(job)
        cache.jobs[values[0]] = job


def _req(job: ActiveJob) -> tuple[int, int]:
    return job.req_rows, job.req_cols


# The oldest transaction still running now (64-bit, with its epoch): rows written by older ones
# are visible to every later read.
# And the jobs table's file node, which TRUNCATE (or a restore) changes.
_PG_HORIZON = text(
    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint,"
    " pg_relation_filenode('jobs')::bigint"
)
_XMIN: Any = literal_column("jobs.xmin::text::bigint")


def _derive(
    spec: dict[str, Any], mode: str, rows: int, cols: int
) -> tuple[bool, str | None, tuple[tuple[int, int], ...]]:
    preemptible = mode == "train" and bool(
        (spec.get("run_options") or {}).get("checkpoint_enabled", True)
    )
    arch = job_arch((spec.get("compile_options") or {}).get("target_device"))
    return preemptible, arch, accepted_shapes(spec, rows, cols)


def to_policy_job(job: ActiveJob) -> PolicyJob:
    """The policy's view of one row (cached on an ActiveJob until its state changes)."""
    cached = getattr(job, "policy", None)
    if cached is not None and job.policy_state == job.state:
        return cached  # type: ignore[no-any-return]
    policy = _policy_job(job)
    if isinstance(job, ActiveJob):
        job.policy, job.policy_state = policy, job.state
    return policy


_POLICY_STATES: dict[str, PolicyState] = {
    JobState.QUEUED.value: JobState.QUEUED.value,
    JobState.COMPILING.value: JobState.COMPILING.value,
    JobState.PENDING.value: JobState.PENDING.value,
    JobState.RUNNING.value: JobState.RUNNING.value,
}
"""The states the policy sees (a region holder, running or cancelling, is running to it)."""


def _policy_job(job: ActiveJob) -> PolicyJob:
    # the policy sees a region holder (running or cancelling) as running
    state = _POLICY_STATES[JobState.RUNNING.value if job.state in HOLDS_REGION else job.state]
    rows = job.region_rows if job.state in HOLDS_REGION and job.region_rows else job.req_rows
    cols = job.region_cols if job.state in HOLDS_REGION and job.region_cols else job.req_cols
    submitted = _ts(job.created_at) or 0.0
    return PolicyJob(
        id=job.id,
        tenant=job.tenant_name,
        user=job.user_name,
        priority_class=job.priority,
        state=state,
        submitted_at=submitted,
        eligible_at=_ts(job.eligible_at) or submitted,
        rows=rows,
        cols=cols,
        time_limit_s=float(job.time_limit_s),
        started_at=_ts(getattr(job, "run_started_at", None) or job.started_at),
        preempt_count=job.preempt_count,
        last_preempted_at=_ts(job.last_preempted_at),
        stopped_for=job.preempted_for,
        preemptible=job.preemptible,
        arch=job.arch,
        shapes=job.shapes,
    )


def accepted_shapes(spec: dict[str, Any], rows: int, cols: int) -> tuple[tuple[int, int], ...]:
    """A flexible region's other shapes (its rotation, then shapes of its PEs), else ()."""
    region = (spec.get("resources") or {}).get("region") or {}
    if not region.get("flexible"):
        return ()
    aspect = float(region.get("max_aspect", 4.0))
    others = flexible_shapes(rows * cols, rows * cols, rows * cols, aspect)
    rotated = ((cols, rows),) if max(rows, cols) / min(rows, cols) <= aspect else ()
    return tuple(s for s in (*rotated, *others) if s != (rows, cols))


def build_snapshot(
    session: Session,
    jobs: list[ActiveJob],
    *,
    now: float,
    half_life_s: float,
    compile_servers: int,
    stale_s: float,
    max_jobs: dict[str, int] | None = None,
    slots_per_server: int = 2,
    slots_per_tenant: int = 0,
    gated: set[str] | frozenset[str] = frozenset(),
) -> Snapshot:
    """The policy's view of the cluster at `now` (epoch seconds); `max_jobs`: the regions each
    wafer's worker runs at once (from the cluster file). Compile slots: those the live compile
    servers report, or the cluster file's `compile_servers` x `slots_per_server` when more;
    `slots_per_tenant` 0 = all but one of them. `gated`: waiting jobs held back this cycle (a
    hold, a dependency, an array's %N: `controller.gates`), left out of the policy."""
    held: dict[str, list[Allocation]] = {}
    for j in jobs:
        if j.wafer_id and j.state in HOLDS_REGION:
            held.setdefault(j.wafer_id, []).append(
                Allocation(
                    j.id,
                    j.tenant_name,
                    j.region_row or 0,
                    j.region_col or 0,
                    j.region_rows or 0,
                    j.region_cols or 0,
                )
            )
    wafers = []
    for w in session.execute(select(Wafer).order_by(Wafer.id)).scalars():
        allocs = tuple(held.get(w.id, ()))
        online = wafer_online(w, now=datetime.fromtimestamp(now).astimezone(), stale_s=stale_s)
        slots = (max_jobs or {}).get(w.id)
        wafers.append(
            PolicyWafer(
                w.id,
                w.rows,
                w.cols,
                online=online,
                allocations=allocs,
                arch=w.arch,
                max_jobs=slots,
            )
        )
    tenants = {
        t.name: _tenant_state(session, t, now, half_life_s)
        for t in session.execute(select(Tenant)).scalars()
    }
    compiling = sum(1 for j in jobs if j.state == JobState.COMPILING)
    total = max(compile_servers * slots_per_server, _live_compile_slots(session, now, stale_s))
    return Snapshot(
        wafers=tuple(wafers),
        tenants=tenants,
        jobs=_policy_jobs(jobs, gated),
        compile_slots_free=max(0, total - compiling),
        compile_slots_per_tenant=slots_per_tenant or (total - 1 if total > 1 else 0),
    )


def _policy_jobs(jobs: list[ActiveJob], gated: set[str] | frozenset[str]) -> tuple[PolicyJob, ...]:
    """to_policy_job of every job not gated; the cached policy job read inline (no call per
    unchanged row of 100,000)."""
    kept = [j for j in jobs if j.id not in gated] if gated else jobs
    return tuple(
        j.policy
        if type(j) is ActiveJob and j.policy is not None and j.policy_state == j.state
        else to_policy_job(j)
        for j in kept
    )


def _tenant_state(session: Session, tenant: Tenant, now: float, half_life_s: float) -> TenantState:
    elapsed = now - (_ts(tenant.usage_at) or now)
    users = session.execute(
        select(User.name, User.usage_pe_s).where(User.tenant_id == tenant.id)
    ).all()
    return TenantState(
        quota=PolicyQuota(
            tenant.max_pes, tenant.max_running_jobs, tenant.max_queued_jobs, tenant.share
        ),
        usage_pe_s=decay_usage(tenant.usage_pe_s, elapsed, half_life_s),
        user_usage_pe_s={name: usage for name, usage in users},
    )


def _live_compile_slots(session: Session, now: float, stale_s: float) -> int:
    rows = session.execute(select(CompileServer.heartbeat_at, CompileServer.slots)).all()
    return sum(slots or 1 for beat, slots in rows if now - (_ts(beat) or 0) < stale_s)
