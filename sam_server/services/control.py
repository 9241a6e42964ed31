"""`hold`, `release`, `requeue`, `update` (scontrol's verbs) and their array forms.

Slurm's rules: a user acts on its own jobs (a tenant admin on its tenant's); lowering a job's
priority or time limit is anyone's right, raising them is a cluster admin's; a job held by an
admin is released only by an admin. Holds and requeues never add a state: a held job stays
queued/compiling/pending with the reason JobHeldUser or JobHeldAdmin (`controller.gates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_domain.jobs import CLASS_RANK
from sam_server.db.models import Job, JobLog
from sam_server.errors import Forbidden, InvalidSpec, InvalidTransition, JobNotFound
from sam_server.schemas.job_spec import parse_duration
from sam_server.schemas.jobs import job_view
from sam_server.services.array_control import (
    ArrayTasks,
    BulkOutcome,
    array_tasks,
    cancel_array,
    hold_array,
    release_array,
    requeue_array,
)
from sam_server.services.arrays import split_task_id
from sam_server.services.auth import Principal
from sam_server.services.bulk import Pace
from sam_server.services.jobs import cancel_job
from sam_server.services.transitions import TERMINAL, JobState
from sam_server.states import WAITING


def resolve(session: Session, *, principal: Principal, job_id: str) -> list[Job]:
    """The job `job_id` names, or every task of the array it names (404 if neither is visible)."""
    query = select(Job).where(Job.id == job_id)
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    job = session.execute(query).scalar_one_or_none()
    if job is not None:
        return [job]
    if split_task_id(job_id) is None:
        query = select(Job).where(Job.array_job_id == job_id)
        if not principal.is_admin:
            query = query.where(Job.tenant_id == principal.tenant_id)
        tasks = list(session.execute(query.order_by(Job.array_task_id)).scalars())
        if tasks:
            return tasks
    raise JobNotFound(f"no job or array {job_id!r}; `sam queue --all` lists your jobs")


def _array(session: Session, principal: Principal, job_id: str) -> ArrayTasks | None:
    """The tasks of the array `job_id` names (set-based verbs), or None for a job's id."""
    if split_task_id(job_id) is not None:
        return None
    if session.execute(select(Job.id).where(Job.id == job_id)).first() is not None:
        return None
    return array_tasks(session, principal, job_id)


def _may_control(principal: Principal, job: Job) -> None:
    if principal.user_id == job.user_id or principal.manages_tenant(job.tenant_id):
        return
    raise Forbidden(
        f"job {job.id} belongs to {job.user.name}; only its user or an admin of its tenant "
        "may change it"
    )


@dataclass
class Outcome:
    """What a verb did to a job or an array: the jobs changed and those left as they were."""

    target: str
    changed: list[Job]
    unchanged: list[tuple[str, str]]  # (job id, why)

    def view(self) -> dict[str, object]:
        return {
            "id": self.target,
            "changed": [job_view(j, summary=True) for j in self.changed],
            "unchanged": [{"id": i, "why": w} for i, w in self.unchanged],
        }


def _apply(session: Session, principal: Principal, job_id: str, verb: Any, *, what: str) -> Outcome:
    """Run `verb(job)` on the job or on every task of the array; an array skips tasks the verb
    does not fit (ended ones, say) and reports them; a single job raises instead."""
    jobs = resolve(session, principal=principal, job_id=job_id)
    single = len(jobs) == 1 and jobs[0].id == job_id
    outcome = Outcome(job_id, [], [])
    for job in jobs:
        try:
            _may_control(principal, job)
            if verb(job):
                outcome.changed.append(job)
            else:
                outcome.unchanged.append((job.id, f"already {what}"))
        except (InvalidTransition, Forbidden) as exc:
            if single:
                raise
            outcome.unchanged.append((job.id, exc.detail))
    session.flush()
    return outcome


def hold(
    session: Session, *, principal: Principal, job_id: str, pace: Pace | None = None
) -> Outcome | BulkOutcome:
    """Keep waiting jobs out of placement until released (an admin's hold: JobHeldAdmin)."""
    tasks = _array(session, principal, job_id)
    if tasks is not None:
        return hold_array(session, principal, tasks, pace or Pace())
    kind = "admin" if principal.is_admin else "user"

    def verb(job: Job) -> bool:
        if job.state not in WAITING:
            raise InvalidTransition(
                f"job {job.id} is {job.state}; only a job that has not started can be held"
                + ("" if job.state in {s.value for s in TERMINAL} else " (`sam requeue --hold`)")
            )
        if job.hold == kind or job.hold == "admin":
            return False
        job.hold = kind
        _log(session, job, f"held by {principal.name} ({kind} hold)")
        return True

    return _apply(session, principal, job_id, verb, what="held")


def release(
    session: Session, *, principal: Principal, job_id: str, pace: Pace | None = None
) -> Outcome | BulkOutcome:
    """Lift a hold; a hold an admin placed is lifted only by an admin."""
    tasks = _array(session, principal, job_id)
    if tasks is not None:
        return release_array(session, principal, tasks, pace or Pace())

    def verb(job: Job) -> bool:
        if job.hold is None:
            return False
        if job.hold == "admin" and not principal.is_admin:
            raise Forbidden(f"job {job.id} was held by an administrator; only one can release it")
        job.hold = None
        if job.reason in ("JobHeldUser", "JobHeldAdmin"):
            job.reason, job.explain = None, None  # the next cycle explains it afresh
        _log(session, job, f"released by {principal.name}")
        return True

    return _apply(session, principal, job_id, verb, what="released (not held)")


def requeue(
    session: Session,
    *,
    principal: Principal,
    job_id: str,
    hold_it: bool,
    pace: Pace | None = None,
) -> Outcome | BulkOutcome:
    """A running job checkpoints, gives its region back and waits again (resuming from the
    checkpoint); `hold_it` also holds it (scontrol requeuehold)."""
    tasks = _array(session, principal, job_id)
    if tasks is not None:
        return requeue_array(session, principal, tasks, pace or Pace(), hold_it=hold_it)

    def verb(job: Job) -> bool:
        if job.state != JobState.RUNNING.value:
            raise InvalidTransition(
                f"job {job.id} is {job.state}; only a running job can be requeued"
                + (" (an ended job is history: submit it again)" if job.state in _ENDED else "")
            )
        if hold_it:
            job.hold = "admin" if principal.is_admin else "user"
        if job.preempt_requested:
            return False
        job.preempt_requested = True
        _log(session, job, f"requeued by {principal.name}; checkpointing, then waiting again")
        return True

    return _apply(session, principal, job_id, verb, what="being requeued")


_ENDED = {s.value for s in TERMINAL}


def cancel(
    session: Session, *, principal: Principal, job_id: str, pace: Pace | None = None
) -> Outcome | BulkOutcome:
    """Cancel a job, or every unfinished task of an array (set-based, chunk by chunk)."""
    tasks = _array(session, principal, job_id)
    if tasks is not None:
        return cancel_array(session, principal, tasks, pace or Pace())
    return Outcome(job_id, [cancel_job(session, principal=principal, job_id=job_id)], [])


def update(
    session: Session,
    *,
    principal: Principal,
    job_id: str,
    priority: str | None = None,
    time_limit: str | int | None = None,
    name: str | None = None,
) -> Outcome:
    """Change a job's priority class, time limit or name (or every task's, for an array)."""
    if priority is None and time_limit is None and name is None:
        raise InvalidSpec("nothing to update: give priority, time_limit or name")
    if priority is not None and priority not in CLASS_RANK:
        raise InvalidSpec(
            f"priority {priority!r} is not one of {', '.join(CLASS_RANK)}",
            errors=[{"field": "priority", "message": "low | normal | high | urgent"}],
        )
    seconds = _seconds(time_limit) if time_limit is not None else None
    if name is not None and not 1 <= len(name) <= 128:
        raise InvalidSpec(
            "a name has 1 to 128 characters", errors=[{"field": "name", "message": "1-128 chars"}]
        )

    def verb(job: Job) -> bool:
        if job.state in _ENDED:
            raise InvalidTransition(f"job {job.id} already ended ({job.state}); nothing to update")
        changes = []
        if priority is not None and priority != job.priority:
            _check_change(
                job,
                principal,
                f"priority ({job.priority} -> {priority})",
                raising=CLASS_RANK[priority] > CLASS_RANK[job.priority],
                once_started="priority matters only before it starts",
            )
            changes.append(f"priority {job.priority} -> {priority}")
            job.priority = priority
        if seconds is not None and seconds != job.time_limit_s:
            _check_change(
                job,
                principal,
                f"time limit ({job.time_limit_s}s -> {seconds}s)",
                raising=seconds > job.time_limit_s,
                once_started="a running attempt keeps the time limit it started with "
                "(`sam requeue` it to apply a new one)",
            )
            changes.append(f"time limit {job.time_limit_s}s -> {seconds}s")
            job.time_limit_s = seconds
        if name is not None and name != job.name:
            changes.append(f"name {job.name!r} -> {name!r}")
            job.name = name
        if changes:
            _log(session, job, f"updated by {principal.name}: {', '.join(changes)}")
        return bool(changes)

    return _apply(session, principal, job_id, verb, what="so")


def _check_change(
    job: Job, principal: Principal, what: str, *, raising: bool, once_started: str
) -> None:
    """A change of `what` is allowed only while the job waits (`once_started` says why), and
    raising it only to a cluster admin."""
    if job.state not in WAITING:
        raise InvalidTransition(f"job {job.id} is {job.state}; {once_started}")
    if raising and not principal.is_admin:
        raise Forbidden(f"raising job {job.id}'s {what} needs a cluster admin; you may lower it")


def _seconds(value: str | int) -> int:
    try:
        seconds = parse_duration(value)
    except (ValueError, TypeError) as exc:
        raise InvalidSpec(
            f"time_limit {str(value)[:64]!r}: {exc}; write e.g. 90s, 30m, 2h",
            errors=[{"field": "time_limit", "message": str(exc)}],
        ) from exc
    if seconds < 1:
        raise InvalidSpec(
            "time_limit must be at least 1s", errors=[{"field": "time_limit", "message": ">= 1s"}]
        )
    return seconds


def _log(session: Session, job: Job, line: str) -> None:
    session.add(JobLog(job_id=job.id, line=line))
