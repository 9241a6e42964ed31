"""Read-side verbs for live views: a job's state timeline, the steps recorded after a given
step, and what changed for every tenant since an event id (state changes, running jobs'
progress, the wafer map per viewer). The event hub in `sam_server.api.livehub` polls these
once per tick for all of a process's followers; the metrics stream reads the steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, defer

from sam_server.db.models import Job, JobEvent, JobMetric
from sam_server.schemas.jobs import iso, job_view
from sam_server.services import history, observe
from sam_server.services.transitions import JobState

MAX_EVENTS = 500  # state changes sent in one tick; the rest follow on the next
MAX_STEPS = 2_000  # steps sent in one tick of a metrics stream


def timeline(session: Session, *, job: Job) -> list[dict[str, object]]:
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


def steps_poll(
    session: Session, *, cursors: dict[str, int]
) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]], dict[str, int]]:
    """One read for every followed job's metrics stream, `cursors` being the newest step read
    per job: (each job's state, "gone" when deleted; the new steps of jobs that have some;
    the newest step of jobs whose steps went back (a requeue resumed from a checkpoint)).
    States are read first: the steps of a job seen ended are all there."""
    ids = list(cursors)
    states = {job_id: "gone" for job_id in ids}
    states.update(session.execute(select(Job.id, Job.state).where(Job.id.in_(ids))).tuples().all())
    newest = dict(
        session.execute(
            select(JobMetric.job_id, func.max(JobMetric.step))
            .where(JobMetric.job_id.in_(ids))
            .group_by(JobMetric.job_id)
        )
        .tuples()
        .all()
    )
    steps: dict[str, list[dict[str, Any]]] = {}
    resets: dict[str, int] = {}
    for job_id, after in cursors.items():
        top = newest.get(job_id, -1)
        if top > after:
            steps[job_id] = steps_after(session, job_id=job_id, after=after)[1]
        elif top < after:
            resets[job_id] = top
    return states, steps, resets


def _step_view(m: JobMetric) -> dict[str, object]:
    return {
        "step": m.step,
        "loss": m.loss,
        "loss_nonfinite": m.loss_nonfinite,
        "sim_cycles": m.sim_cycles,
        "samples_per_sec": m.samples_per_sec,
        "accuracy": m.accuracy,
    }


def newest_event_id(session: Session) -> int:
    """The id of the newest state change of any job (0: none)."""
    return int(session.execute(select(func.max(JobEvent.id))).scalar() or 0)


def event_ids_above(session: Session, *, above: int) -> list[int]:
    """The ids of the state changes numbered above `above` that are visible now."""
    query = select(JobEvent.id).where(JobEvent.id > above).order_by(JobEvent.id)
    return list(session.execute(query).scalars())


@dataclass
class Change:
    """One state change as the live streams send it: the job as listings show it plus `event`."""

    id: int
    tenant_id: int
    view: dict[str, Any]


@dataclass
class Poll:
    """What one poll of the live event hub read, for every tenant at once."""

    changes: list[Change]  # state changes numbered above the cursor, or in `gaps`, by id
    full: bool  # MAX_EVENTS were read above the cursor: more follow on the next poll
    progress: dict[str, tuple[int, int, int | None, float | None]]  # running: (tenant, step, ..)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # by viewer key


def poll(
    session: Session, *, after: int, gaps: list[int], viewers: set[str], stale_s: float
) -> Poll:
    """One read for every follower of `/api/v1/events`: the state changes numbered above
    `after` (at most MAX_EVENTS) plus those among `gaps` (ids skipped earlier that may belong to
    a transaction that had not committed yet), running jobs' progress, and the cluster view of
    each viewer key. The caller filters by tenant; nothing here is per follower."""
    query = _changes_query()
    above = query.where(JobEvent.id > after).order_by(JobEvent.id).limit(MAX_EVENTS)
    rows = list(session.execute(above).tuples().all())
    full = len(rows) == MAX_EVENTS
    for start in range(0, len(gaps), 500):  # bounded IN lists
        late = query.where(JobEvent.id.in_(gaps[start : start + 500]))
        rows += session.execute(late).tuples().all()
    rows.sort(key=lambda r: r[0].id)
    changes = [Change(event.id, job.tenant_id, _change_view(event, job)) for event, job in rows]
    running = select(
        Job.id, Job.tenant_id, Job.progress_step, Job.total_steps, Job.progress_loss
    ).where(Job.state.in_((JobState.RUNNING.value, JobState.CANCELLING.value)))
    progress: dict[str, tuple[int, int, int | None, float | None]] = {
        job_id: (tenant_id, step, total, loss)
        for job_id, tenant_id, step, total, loss in session.execute(running).tuples()
    }
    clusters = observe.cluster_views(session, viewers=viewers, stale_s=stale_s) if viewers else {}
    for view in clusters.values():
        for server in view["compile_servers"]:
            server["heartbeat_at"] = iso(server["heartbeat_at"])
    return Poll(changes=changes, full=full, progress=progress, clusters=clusters)


def catch_up(
    session: Session, *, viewer: str, after: int, upto: int, skip: set[int]
) -> tuple[list[Change], int | None]:
    """A resumed follower's missed state changes: numbered in (`after`, `upto`], its viewer's
    only, leaving out `skip` (ids the hub still waits for; it sends them when they appear).
    Returns (at most MAX_EVENTS changes, the id to continue after when more remain)."""
    query = _changes_query().where(JobEvent.id > after, JobEvent.id <= upto)
    if viewer != observe.ADMIN_VIEW:
        query = query.where(Job.tenant_id == int(viewer[1:]))
    rows = session.execute(query.order_by(JobEvent.id).limit(MAX_EVENTS)).tuples().all()
    out = [
        Change(event.id, job.tenant_id, _change_view(event, job))
        for event, job in rows
        if event.id not in skip
    ]
    return out, (rows[-1][0].id if len(rows) == MAX_EVENTS else None)


def _changes_query() -> Select[JobEvent, Job]:
    """State changes with their jobs, less what a listing never shows (spec, files, report)."""
    query = select(JobEvent, Job).join(Job, Job.id == JobEvent.job_id)
    return query.options(
        defer(Job.spec), defer(Job.files), defer(Job.report), defer(Job.compile_summary)
    )


def _change_view(event: JobEvent, job: Job) -> dict[str, object]:
    view = job_view(job, summary=True)
    view["event"] = {
        "from_state": event.from_state,
        "to_state": event.to_state,
        "at": iso(event.at),
        "reason": event.reason,
    }
    return view
