"""Build the policy's `Snapshot` from the database."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import CompileServer, Job, Tenant, User, Wafer
from sam_server.db.types import as_utc
from sam_server.scheduling import Allocation, PolicyConfig, Quota, Snapshot, TenantState
from sam_server.scheduling import Job as PolicyJob
from sam_server.scheduling import Wafer as PolicyWafer
from sam_server.scheduling.fairshare import decay_usage
from sam_server.scheduling.shapes import flexible_shapes
from sam_server.services.jobs import job_arch
from sam_server.services.observe import wafer_online
from sam_server.services.transitions import ACTIVE

# A job in `cancelling` still holds its region until its worker stops it.
HOLDS_REGION = ("running", "cancelling")


def _ts(value: datetime | None) -> float | None:
    value = as_utc(value)
    return value.timestamp() if value is not None else None


def load_active_jobs(session: Session) -> list[Job]:
    """Every job that is not terminal."""
    return list(
        session.execute(select(Job).where(Job.state.in_([s.value for s in ACTIVE]))).scalars()
    )


def to_policy_job(job: Job) -> PolicyJob:
    state = "running" if job.state in HOLDS_REGION else job.state
    rows = job.region_rows if job.state in HOLDS_REGION and job.region_rows else job.req_rows
    cols = job.region_cols if job.state in HOLDS_REGION and job.region_cols else job.req_cols
    submitted = _ts(job.created_at) or 0.0
    return PolicyJob(
        id=job.id,
        tenant=job.tenant.name,
        user=job.user.name,
        priority_class=job.priority,  # type: ignore[arg-type]
        state=state,  # type: ignore[arg-type]
        submitted_at=submitted,
        eligible_at=_ts(job.eligible_at) or submitted,
        rows=rows,
        cols=cols,
        time_limit_s=float(job.time_limit_s),
        started_at=_ts(job.started_at),
        preempt_count=job.preempt_count,
        last_preempted_at=_ts(job.last_preempted_at),
        preemptible=job.mode == "train"
        and bool((job.spec.get("run_options") or {}).get("checkpoint_enabled", True)),
        arch=job_arch((job.spec.get("compile_options") or {}).get("target_device")),
        shapes=accepted_shapes(job.spec, job.req_rows, job.req_cols),
    )


def accepted_shapes(spec: dict, rows: int, cols: int) -> tuple[tuple[int, int], ...]:  # type: ignore[type-arg]
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
    jobs: list[Job],
    *,
    now: float,
    config: PolicyConfig,
    compile_servers: int,
    stale_s: float,
    max_jobs: dict[str, int] | None = None,
    gated: set[str] | frozenset[str] = frozenset(),
) -> Snapshot:
    """The policy's view of the cluster at `now` (epoch seconds); `max_jobs`: the regions each
    wafer's worker runs at once (from the cluster file); `gated`: waiting jobs held back this
    cycle (a hold, a dependency, an array's %N: `scheduler.gates`), left out of the policy."""
    wafers = []
    for w in session.execute(select(Wafer).order_by(Wafer.id)).scalars():
        allocs = tuple(
            Allocation(
                j.id,
                j.tenant.name,
                j.region_row or 0,
                j.region_col or 0,
                j.region_rows or 0,
                j.region_cols or 0,
            )
            for j in jobs
            if j.wafer_id == w.id and j.state in HOLDS_REGION
        )
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
    live_servers = _live_compile_servers(session, now, stale_s)
    slots = max(0, max(compile_servers, live_servers) * 2 - compiling)
    return Snapshot(
        wafers=tuple(wafers),
        tenants=tenants,
        jobs=tuple(to_policy_job(j) for j in jobs if j.id not in gated),
        compile_slots_free=slots,
        config=config,
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


def _live_compile_servers(session: Session, now: float, stale_s: float) -> int:
    beats = session.execute(select(CompileServer.heartbeat_at)).scalars()
    return sum(1 for b in beats if now - (_ts(b) or 0) < stale_s)
