"""Read-side verbs for live views: a job's state timeline, the steps recorded after a given
step, and the changes a principal may see since an event id (state changes, running jobs'
progress, the wafer map). The SSE routes in `sam_server.api.live` poll these."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobEvent, JobMetric
from sam_server.schemas.jobs import iso, job_view
from sam_server.services import history, observe
from sam_server.services.auth import Principal
from sam_server.services.transitions import JobState

MAX_EVENTS = 500  # state changes sent in one tick; the rest follow on the next
MAX_STEPS = 2_000  # steps sent in one tick of a metrics stream


def timeline(session: Session, *, job: Job) -> list[dict[str, Any]]:
    """Every state transition of `job`, oldest first: `[{at, from_state, to_state, reason}]`."""
    query = select(JobEvent).where(JobEvent.job_id == job.id).order_by(JobEvent.id)
    return [
        {"at": iso(e.at), "from_state": e.from_state, "to_state": e.to_state, "reason": e.reason}
        for e in session.execute(query).scalars()
    ]


def steps_after(session: Session, *, job_id: str, after: int) -> tuple[str, list[dict[str, Any]]]:
    """(the job's state, its steps numbered above `after`, oldest first, at most MAX_STEPS).

    Recent steps live in `job_metrics`; a follower that fell behind the packing of old steps
    into chunks is caught up from `history.metrics` instead."""
    state = session.execute(select(Job.state).where(Job.id == job_id)).scalar_one_or_none()
    query = (
        select(JobMetric)
        .where(JobMetric.job_id == job_id, JobMetric.step > after)
        .order_by(JobMetric.step)
        .limit(MAX_STEPS)
    )
    rows = list(session.execute(query).scalars())
    if rows and rows[0].step > after + 1:  # the steps between were packed meanwhile
        job = session.get(Job, job_id)
        if job is not None:
            steps = [s for s in history.metrics(session, job=job)["steps"] if s["step"] > after]
            return state or "gone", steps[:MAX_STEPS]
    return state or "gone", [_step_view(m) for m in rows]


def newest_step(session: Session, *, job_id: str) -> int:
    """The highest step recorded for the job (-1: none)."""
    value = session.execute(
        select(func.max(JobMetric.step)).where(JobMetric.job_id == job_id)
    ).scalar()
    return -1 if value is None else int(value)


def _step_view(m: JobMetric) -> dict[str, Any]:
    return {
        "step": m.step,
        "loss": m.loss,
        "loss_nonfinite": m.loss_nonfinite,
        "sim_cycles": m.sim_cycles,
        "samples_per_sec": m.samples_per_sec,
        "accuracy": m.accuracy,
    }


@dataclass
class Watch:
    """What one follower of `/api/v1/events` has been sent so far."""

    cursor: int  # the newest JobEvent id sent
    progress: dict[str, tuple[int, float | None]] = field(default_factory=dict)
    cluster: str = ""


def newest_event_id(session: Session) -> int:
    """The id of the newest state change of any job (0: none)."""
    return int(session.execute(select(func.max(JobEvent.id))).scalar() or 0)


def changes(
    session: Session, *, principal: Principal, watch: Watch, stale_s: float
) -> list[tuple[str, dict[str, Any], int | None]]:
    """The events for one follower since `watch` (which is advanced): `("job", the job as
    listings show it plus `event` {from_state, to_state, at, reason}, event id)` per state
    change, `("progress", {items: [{id, step, total_steps, loss}]}, None)` for running jobs
    that moved, `("cluster", the cluster view, None)` when the wafer map changed. Only jobs of
    the principal's tenant (admins: all), as every other read of the API."""
    out: list[tuple[str, dict[str, Any], int | None]] = []
    # The newest id first, and only events up to it: an event committed between the two reads
    # is then left for the next tick instead of being skipped by the cursor.
    top = newest_event_id(session)
    query = select(JobEvent, Job).join(Job, Job.id == JobEvent.job_id)
    query = query.where(JobEvent.id > watch.cursor, JobEvent.id <= top)
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    rows = session.execute(query.order_by(JobEvent.id).limit(MAX_EVENTS)).tuples().all()
    for event, job in rows:
        view = job_view(job, summary=True)
        view["event"] = {
            "from_state": event.from_state,
            "to_state": event.to_state,
            "at": iso(event.at),
            "reason": event.reason,
        }
        out.append(("job", view, event.id))
    if len(rows) == MAX_EVENTS:
        watch.cursor = rows[-1][0].id
    else:  # nothing else of this principal's up to `top`: skip other tenants' events for good
        watch.cursor = max(watch.cursor, top)
    moved = _progress(session, principal=principal, watch=watch)
    if moved:
        out.append(("progress", {"items": moved}, None))
    view = observe.cluster(session, principal=principal, stale_s=stale_s)
    for server in view["compile_servers"]:
        server["heartbeat_at"] = iso(server["heartbeat_at"])
    text = json.dumps(view, sort_keys=True)
    if text != watch.cluster:
        watch.cluster = text
        out.append(("cluster", view, None))
    return out


def _progress(session: Session, *, principal: Principal, watch: Watch) -> list[dict[str, Any]]:
    query = select(Job.id, Job.progress_step, Job.total_steps, Job.progress_loss).where(
        Job.state.in_((JobState.RUNNING.value, JobState.CANCELLING.value))
    )
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    moved = []
    seen: dict[str, tuple[int, float | None]] = {}
    for job_id, step, total, loss in session.execute(query).tuples():
        seen[job_id] = (step, loss)
        if watch.progress.get(job_id) != (step, loss):
            moved.append({"id": job_id, "step": step, "total_steps": total, "loss": loss})
    watch.progress = seen
    return moved
