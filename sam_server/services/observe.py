"""Read-side verbs: logs, metrics, explain, report, the queue and the cluster view."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sam_server.services.history import StepRecord

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session, defer

from sam_server.db.models import CompileServer, Job, JobLog, Tenant, User, Wafer
from sam_server.db.types import as_utc, utcnow
from sam_server.scheduling.geometry import FreeSpace
from sam_server.schemas.jobs import job_view
from sam_server.services.auth import Principal
from sam_server.services.transitions import TERMINAL, JobState
from sam_server.states import WAITING


def log_lines(session: Session, *, job: Job, after_id: int = 0) -> list[JobLog]:
    """The job's log lines after id `after_id`, in order."""
    return list(
        session.execute(
            select(JobLog).where(JobLog.job_id == job.id, JobLog.id > after_id).order_by(JobLog.id)
        ).scalars()
    )


def format_log(line: JobLog) -> str:
    at = as_utc(line.at)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if at else ""
    return f"{stamp} {line.level:<5} {line.line}"


def epoch_summaries(steps: list[StepRecord], steps_per_epoch: int) -> list[dict[str, object]]:
    """`[{epoch, steps, mean_loss, accuracy}]` per epoch (1-based) with at least one step;
    accuracy is the mean of the steps' accuracies, null when the loss is not classification."""
    if steps_per_epoch < 1:
        return []
    groups: dict[int, list[StepRecord]] = {}
    for row in steps:
        groups.setdefault(row["step"] // steps_per_epoch + 1, []).append(row)
    out: list[dict[str, object]] = []
    for epoch, rows in sorted(groups.items()):
        accuracies = [a for r in rows if (a := r.get("accuracy")) is not None]
        losses = [r["loss"] for r in rows if r["loss"] is not None]  # null: not finite
        out.append(
            {
                "epoch": epoch,
                "steps": len(rows),
                "mean_loss": sum(losses) / len(losses) if len(losses) == len(rows) else None,
                "accuracy": sum(accuracies) / len(accuracies) if accuracies else None,
            }
        )
    return out


def explain(job: Job) -> dict[str, object]:
    """Why the job is not running: every reason, its position and ETA (from the last plan)."""
    data = dict(job.explain or {})
    reasons = data.get("reasons") or []
    if job.state in (JobState.RUNNING.value, JobState.CANCELLING.value):
        reasons = []
    elif job.state in TERMINAL:
        reasons = [{"code": "Ended", "message": f"the job {job.state}"}]
    elif not reasons:
        reasons = [{"code": "NotYetPlanned", "message": "the scheduler has not looked at it yet"}]
    return {
        "job_id": job.id,
        "state": job.state,
        "reasons": reasons,
        "position": data.get("position") if job.state in WAITING else None,
        "eta": data.get("eta") if job.state in WAITING else None,
        "priority": data.get("priority"),
        # when the scheduler computed this explanation (deep in a long queue: up to a few cycles)
        "planned_at": data.get("planned_at") if job.state in WAITING else None,
    }


def queue(
    session: Session,
    *,
    principal: Principal,
    limit: int | None = None,
    user: str | None = None,
    tenant: str | None = None,
) -> list[dict[str, object]]:
    """Jobs not yet running, in the order the scheduler will consider them; `limit`: the
    first N only (only those are loaded in full), `user`/`tenant` (admins) narrow it."""
    # Ordered and cut in the database: the last plan's position (jobs it has not placed
    # yet last), then submit order; only the first `limit` are loaded in full.
    position = func.coalesce(Job.explain["position"].as_integer(), 10**9)
    query = select(Job.id).where(Job.state.in_(WAITING)).order_by(position, Job.seq)
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    elif tenant:
        query = query.join(Tenant, Job.tenant_id == Tenant.id).where(Tenant.name == tenant)
    if user:
        query = query.join(User, Job.user_id == User.id).where(User.name == user)
    ids = list(session.execute(query.limit(limit)).scalars())
    found: dict[str, Job] = {}
    for start in range(0, len(ids), 5000):  # bounded IN lists (SQLite caps bound parameters)
        chunk = select(Job).where(Job.id.in_(ids[start : start + 5000]))
        # what a listing never shows: the spec, the uploaded files, the report
        chunk = chunk.options(defer(Job.spec), defer(Job.files), defer(Job.report))
        chunk = chunk.options(defer(Job.compile_summary))
        found.update((j.id, j) for j in session.execute(chunk).scalars())
    jobs = [found[i] for i in ids if i in found]
    items = []
    for job in jobs:
        item = job_view(job, summary=True)
        info = explain(job)
        item.update(position=info["position"], priority_detail=info["priority"])
        item.update(reasons=info["reasons"], eta=info["eta"])
        items.append(item)
    return items


def wafer_online(wafer: Wafer, *, now: datetime | None = None, stale_s: float = 15.0) -> bool:
    """A wafer takes jobs while its worker heartbeats."""
    beat = as_utc(wafer.heartbeat_at)
    now = now or utcnow()
    return wafer.state == "online" and beat is not None and (now - beat).total_seconds() < stale_s


ADMIN_VIEW = "*"  # the viewer key of a cluster admin: every tenant's jobs


def viewer_key(principal: Principal) -> str:
    """Who a view is for: `ADMIN_VIEW` for the cluster admin, else the principal's tenant id.
    Principals with the same key see the same cluster view and the same jobs."""
    return ADMIN_VIEW if principal.is_admin else f"t{principal.tenant_id}"


def job_visible(viewer: str, tenant_id: int | None) -> bool:
    """Whether a job of `tenant_id` is shown to `viewer` (a `viewer_key`)."""
    return viewer == ADMIN_VIEW or (tenant_id is not None and viewer == f"t{tenant_id}")


def cluster(session: Session, *, principal: Principal, stale_s: float = 15.0) -> dict[str, object]:
    """Wafers with their allocations (other tenants' job ids hidden from non-admins)."""
    key = viewer_key(principal)
    return cluster_views(session, viewers=[key], stale_s=stale_s)[key]


def cluster_views(
    session: Session, *, viewers: Iterable[str], stale_s: float = 15.0
) -> dict[str, dict[str, Any]]:
    """The `GET /cluster` view for each viewer key, from one read of the database (the live
    event hub asks for every tenant with an open stream at once)."""
    placed = select(Job).where(Job.wafer_id.is_not(None))
    placed = placed.options(defer(Job.spec), defer(Job.files), defer(Job.report))
    running = list(session.execute(placed.options(defer(Job.compile_summary))).scalars())
    wafers = list(session.execute(select(Wafer).order_by(Wafer.id)).scalars())
    servers = [
        compile_server_view(s, stale_s=stale_s)
        for s in session.execute(select(CompileServer).order_by(CompileServer.id)).scalars()
    ]
    waiting = (JobState.QUEUED.value, JobState.COMPILING.value)
    counts = session.execute(
        select(Job.state, Job.tenant_id, func.count())
        .where(Job.state.in_(waiting))
        .group_by(Job.state, Job.tenant_id)
    ).all()
    names = {j.id: j.tenant.name for j in running}
    views: dict[str, dict[str, Any]] = {}
    for viewer in set(viewers):
        out = []
        for wafer in wafers:
            allocs = []
            for job in (j for j in running if j.wafer_id == wafer.id):
                own = job_visible(viewer, job.tenant_id)
                allocs.append(
                    {
                        "job_id": job.id if own else None,
                        "tenant": names[job.id] if own else None,
                        "row": job.region_row,
                        "col": job.region_col,
                        "rows": job.region_rows,
                        "cols": job.region_cols,
                    }
                )
            out.append(_wafer_view(wafer, allocs, stale_s=stale_s))
        views[viewer] = {
            "wafers": out,
            "compile_servers": [dict(s) for s in servers],
            "compile_queue": _compile_queue(counts, viewer),
        }
    return views


def _wafer_view(wafer: Wafer, allocs: list[dict[str, Any]], *, stale_s: float) -> dict[str, object]:
    used = sum(int(a["rows"] or 0) * int(a["cols"] or 0) for a in allocs)
    online = wafer_online(wafer, stale_s=stale_s)
    space = FreeSpace.of(
        wafer.rows,
        wafer.cols,
        [
            (int(a["row"] or 0), int(a["col"] or 0), int(a["rows"] or 0), int(a["cols"] or 0))
            for a in allocs
            if a["rows"] and a["cols"]
        ],
    )
    lr, lc = space.largest_free_rect()
    return {
        "id": wafer.id,
        "arch": wafer.arch,
        "rows": wafer.rows,
        "cols": wafer.cols,
        "state": "online" if online else "offline",
        "free_pes": wafer.rows * wafer.cols - used,
        "largest_free_rect": {"rows": lr, "cols": lc},
        # 1 - largest free rectangle / free PEs: 0 when the free PEs form one rectangle
        "fragmentation": round(space.fragmentation(), 4),
        "allocations": allocs,
    }


def _compile_queue(counts: Iterable[Any], viewer: str) -> dict[str, int]:
    """Jobs waiting for a compile slot (state queued) and compiling now, for the whole cluster
    and for the viewer's tenant (an admin's `mine` is every tenant's)."""
    waiting = (JobState.QUEUED.value, JobState.COMPILING.value)
    out = {state: 0 for state in waiting} | {f"{state}_mine": 0 for state in waiting}
    for state, tenant_id, n in counts:
        out[state] += n
        if job_visible(viewer, tenant_id):
            out[f"{state}_mine"] += n
    return out


def compile_server_view(server: CompileServer, *, stale_s: float) -> dict[str, object]:
    """A compile server as `GET /cluster` lists it: `offline` (and busy 0) once its heartbeat is
    older than `stale_s`, as wafers are; the scheduler removes it after a grace period."""
    beat = as_utc(server.heartbeat_at)
    online = beat is not None and (utcnow() - beat).total_seconds() < stale_s
    return {
        "id": server.id,
        "state": "online" if online else "offline",
        "heartbeat_at": beat,
        "busy": server.busy if online else 0,
        "slots": server.slots,
        "compiles": server.compiles,
        "cache_hits": server.cache_hits,
    }


def expire_compile_servers(session: Session, *, older_than_s: float) -> list[str]:
    """Delete compile servers silent for longer than `older_than_s` (each worker process has its
    own id, so dead ones would otherwise be listed forever); returns the ids removed."""
    cutoff = utcnow() - timedelta(seconds=older_than_s)
    dead = list(
        session.execute(
            select(CompileServer.id).where(
                or_(CompileServer.heartbeat_at.is_(None), CompileServer.heartbeat_at < cutoff)
            )
        ).scalars()
    )
    if dead:
        session.execute(delete(CompileServer).where(CompileServer.id.in_(dead)))
    return dead
