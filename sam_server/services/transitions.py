"""The one writer of `Job.state`: an explicit table of allowed transitions.

Every state change in SAM (API, scheduler, workers, reaper) goes through `transition`, which
checks the table, stamps times, bumps the row version and records a `JobEvent`.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from sam_server.db.models import Job, JobEvent
from sam_server.db.types import utcnow
from sam_server.errors import InvalidTransition
from sam_server.services.accounting import record_job_end
from sam_server.states import ACTIVE, ALLOWED, TERMINAL, JobState, can_transition

__all__ = ["ACTIVE", "ALLOWED", "TERMINAL", "JobState", "can_transition", "transition"]


def transition(
    session: Session,
    job: Job,
    to: JobState | str,
    *,
    reason: str | None = None,
    expect_version: int | None = None,
) -> Job:
    """Move `job` to state `to`, or raise `InvalidTransition`.

    With `expect_version`, the write is a compare-and-set on the row version: a concurrent writer
    (another worker, a duplicate Celery delivery) makes it raise instead of overwriting.
    """
    to = JobState(to)
    current = JobState(job.state)
    if to not in ALLOWED[current]:
        raise InvalidTransition(f"job {job.id} is {current.value}; it cannot become {to.value}")
    now = utcnow()
    values: dict[str, object] = {"state": to.value, "updated_at": now, "version": job.version + 1}
    if to == JobState.RUNNING:
        values["started_at"] = job.started_at or now
    if to in TERMINAL:
        values["finished_at"] = now
        values.update(wafer_id=None, region_row=None, region_col=None)
        values.update(region_rows=None, region_cols=None, lease_owner=None, lease_expires_at=None)
    if to in (JobState.PENDING, JobState.QUEUED):
        values.update(wafer_id=None, region_row=None, region_col=None)
        values.update(region_rows=None, region_cols=None, lease_owner=None, lease_expires_at=None)
    version = job.version if expect_version is None else expect_version
    result = session.execute(
        update(Job).where(Job.id == job.id, Job.version == version).values(**values)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        session.rollback()
        raise InvalidTransition(f"job {job.id} changed concurrently; {to.value} not applied")
    for key, value in values.items():
        # The row is already written: update the loaded object without marking it dirty.
        set_committed_value(job, key, value)
    session.add(JobEvent(job_id=job.id, from_state=current.value, to_state=to.value, reason=reason))
    if to in TERMINAL:  # the accounting record, kept after retention purges the job
        record_job_end(session, job)
    return job
