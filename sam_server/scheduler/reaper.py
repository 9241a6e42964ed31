"""Requeue work whose lease expired: its worker died or never picked it up."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobAttempt, JobLog
from sam_server.db.types import utcnow
from sam_server.services.transitions import transition
from sam_server.states import LEASED, JobState


def reap_expired(session: Session, *, max_attempts: int) -> list[str]:
    """Requeue (or fail with `worker_lost` after `max_attempts`) every job whose lease expired."""
    now = utcnow()
    expired = session.execute(
        select(Job).where(
            Job.state.in_(LEASED), Job.lease_expires_at.is_not(None), Job.lease_expires_at < now
        )
    ).scalars()
    touched = []
    for job in expired:
        _requeue(session, job, max_attempts)
        touched.append(job.id)
    return touched


def _requeue(session: Session, job: Job, max_attempts: int) -> None:
    who = job.lease_owner or "no worker picked it up"
    _end_attempt(session, job)
    if job.state == JobState.CANCELLING.value:
        transition(session, job, JobState.CANCELLED, reason=f"worker lost ({who}) while cancelling")
        return
    job.lost_attempts += 1
    if job.lost_attempts >= max_attempts:
        job.error_kind = "worker_lost"
        job.error_message = (
            f"the job's worker was lost {job.lost_attempts} times (last: {who}); "
            "giving up — resubmit it, and tell an admin if it keeps happening"
        )
        transition(session, job, JobState.FAILED, reason="worker_lost")
        return
    back = JobState.QUEUED if job.state == JobState.COMPILING.value else JobState.PENDING
    resume = f"; resumes from step {job.checkpoint_step}" if job.checkpoint_step else ""
    session.add(
        JobLog(
            job_id=job.id,
            level="WARN",
            line=f"lease expired ({who}); requeued as {back.value}{resume}",
        )
    )
    job.reason = "Requeued"
    transition(session, job, back, reason=f"lease expired ({who})")


def _end_attempt(session: Session, job: Job) -> None:
    row = session.execute(
        select(JobAttempt).where(JobAttempt.job_id == job.id, JobAttempt.attempt == job.attempts)
    ).scalar_one_or_none()
    if row is not None and row.ended_at is None:
        row.ended_at = utcnow()
        row.outcome = "lost"
