"""Find the work whose lease expired (its worker died or never picked it up) and requeue it
(`services/dispatch.requeue_lost`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.db.types import utcnow
from sam_server.services.dispatch import requeue_lost
from sam_server.states import LEASED


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
        requeue_lost(session, job, max_attempts=max_attempts)
        touched.append(job.id)
    return touched
