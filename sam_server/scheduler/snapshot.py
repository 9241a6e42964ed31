"""Build the policy's `Snapshot` from the database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import CompileServer, Job, Tenant, User, Wafer
from sam_server.db.types import as_utc
from sam_server.scheduling import Allocation, PolicyConfig, Quota, Snapshot, TenantState
from sam_server.scheduling import Job as PolicyJob
from sam_server.scheduling import Wafer as PolicyWafer
from sam_server.scheduling.fairshare import decay_usage
from sam_server.scheduling.model import JobState
from sam_server.scheduling.shapes import flexible_shapes
from sam_server.services.jobs import job_arch
from sam_server.services.observe import wafer_online
from sam_server.services.transitions import ACTIVE
from sam_server.states import HOLDS_REGION  # `cancelling` holds its region until it stops


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
    Job.req_rows,
    Job.req_cols,
    Job.time_limit_s,
    Job.preempt_count,
    Job.wafer_id,
    Job.region_row,
    Job.region_col,
    Job.region_rows,
    Job.region_cols,
    Job.compile_hash,
    Job.cancel_requested,
    Job.reason,
    # what scheduler.gates reads: holds, dependencies, arrays
    Job.name,
    Job.seq,
    Job.hold,
    Job.dependency,
    Job.kill_invalid_depend,
    Job.array_job_id,
    Job.array_task_id,
    Job.array_max_running,
)
_DERIVED: dict[str, tuple[bool, str | None, tuple[tuple[int, int], ...]]] = {}


class ActiveJob:
    """A non-terminal job as the planning cycle reads it: plain attributes, no ORM identity
    (loading 100,000 ORM objects with their tenant, user and JSON spec took most of a cycle).
    `tenant_name`, `user_name` and the spec-derived `preemptible`, `arch`, `shapes` are set by
    load_active_jobs."""

    __slots__ = (
        *(c.key for c in _COLUMNS),
        "tenant_name",
        "user_name",
        "preemptible",
        "arch",
        "shapes",
    )

    def __init__(self, values: dict[str, object]) -> None:
        for key, value in values.items():
            setattr(self, key, value)


def load_active_jobs(session: Session) -> list[Any]:
    """Every job that is not terminal, as ActiveJob rows."""
    tenants = dict(session.execute(select(Tenant.id, Tenant.name)).all())
    users = dict(session.execute(select(User.id, User.name)).all())
    rows = session.execute(
        select(*_COLUMNS).where(Job.state.in_([s.value for s in ACTIVE]))
    ).mappings()
    jobs: list[Any] = [ActiveJob(dict(r)) for r in rows]
    missing = [j.id for j in jobs if j.id not in _DERIVED]
    for at in range(0, len(missing), 1000):
        batch = missing[at : at + 1000]
        for job_id, spec, mode, rows_, cols_ in session.execute(
            select(Job.id, Job.spec, Job.mode, Job.req_rows, Job.req_cols).where(Job.id.in_(batch))
        ):
            _DERIVED[job_id] = _derive(spec, mode, rows_, cols_)
    if len(_DERIVED) > 4 * len(jobs) + 10_000:  # forget ended jobs now and then
        live = {j.id for j in jobs}
        for job_id in [k for k in _DERIVED if k not in live]:
            del _DERIVED[job_id]
    for job in jobs:
        job.tenant_name = tenants.get(job.tenant_id, "")
        job.user_name = users.get(job.user_id, "")
        job.preemptible, job.arch, job.shapes = _DERIVED[job.id]
    return jobs


def _derive(
    spec: dict[str, Any], mode: str, rows: int, cols: int
) -> tuple[bool, str | None, tuple[tuple[int, int], ...]]:
    preemptible = mode == "train" and bool(
        (spec.get("run_options") or {}).get("checkpoint_enabled", True)
    )
    arch = job_arch((spec.get("compile_options") or {}).get("target_device"))
    return preemptible, arch, accepted_shapes(spec, rows, cols)


def to_policy_job(job: Any) -> PolicyJob:
    # the policy sees a region holder (running or cancelling) as running
    state: JobState = "running" if job.state in HOLDS_REGION else job.state
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
        started_at=_ts(job.started_at),
        preempt_count=job.preempt_count,
        last_preempted_at=_ts(job.last_preempted_at),
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
    jobs: list[Any],
    *,
    now: float,
    config: PolicyConfig,
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
    hold, a dependency, an array's %N: `scheduler.gates`), left out of the policy."""
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
        t.name: _tenant_state(session, t, now, config)
        for t in session.execute(select(Tenant)).scalars()
    }
    compiling = sum(1 for j in jobs if j.state == "compiling")
    total = max(compile_servers * slots_per_server, _live_compile_slots(session, now, stale_s))
    return Snapshot(
        wafers=tuple(wafers),
        tenants=tenants,
        jobs=tuple(to_policy_job(j) for j in jobs if j.id not in gated),
        compile_slots_free=max(0, total - compiling),
        config=config,
        compile_slots_per_tenant=slots_per_tenant or (total - 1 if total > 1 else 0),
    )


def _tenant_state(
    session: Session, tenant: Tenant, now: float, config: PolicyConfig
) -> TenantState:
    elapsed = now - (_ts(tenant.usage_at) or now)
    users = session.execute(
        select(User.name, User.usage_pe_s).where(User.tenant_id == tenant.id)
    ).all()
    return TenantState(
        quota=Quota(tenant.max_pes, tenant.max_running_jobs, tenant.max_queued_jobs, tenant.share),
        usage_pe_s=decay_usage(tenant.usage_pe_s, elapsed, config.half_life_s),
        user_usage_pe_s={name: usage for name, usage in users},
    )


def _live_compile_slots(session: Session, now: float, stale_s: float) -> int:
    rows = session.execute(select(CompileServer.heartbeat_at, CompileServer.slots)).all()
    return sum(slots or 1 for beat, slots in rows if now - (_ts(beat) or 0) < stale_s)
