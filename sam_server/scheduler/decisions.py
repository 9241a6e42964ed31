"""Write a `Plan` into the database: transitions, regions, explain data and outbox messages.

All of it happens in the caller's transaction; the messages are sent only after it commits.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobAttempt, JobLog, OutboxMessage
from sam_server.db.types import utcnow
from sam_server.scheduling import JobExplain, Plan
from sam_server.services.transitions import JobState, transition


def wafer_queue(wafer_id: str) -> str:
    """The Celery queue of one wafer's worker."""
    return f"wafer.{wafer_id}"


def apply_plan(
    session: Session, plan: Plan, jobs: dict[str, Job], *, dispatch_timeout_s: float
) -> int:
    """Apply every decision of `plan`; returns how many messages were queued for dispatch."""
    sent = 0
    deadline = utcnow() + timedelta(seconds=dispatch_timeout_s)
    for job_id in plan.compiles:
        job = jobs[str(job_id)]
        if job.state == JobState.QUEUED.value:
            job.reason, job.lease_owner, job.lease_expires_at = "Compiling", None, deadline
            transition(session, job, JobState.COMPILING, reason="sent to a compile server")
            session.add(
                OutboxMessage(task="sam.compile", queue="compile", payload={"job_id": job.id})
            )
            sent += 1
    for start in plan.starts:
        job = jobs[str(start.job_id)]
        if job.state == JobState.PENDING.value:
            _start(
                session,
                job,
                start.wafer_id,
                (start.row, start.col, start.rows, start.cols),
                deadline,
            )
            sent += 1
    for pre in plan.preemptions:
        job = jobs[str(pre.job_id)]
        if job.state == JobState.RUNNING.value and not job.preempt_requested:
            job.preempt_requested = True
            session.add(
                JobLog(
                    job_id=job.id,
                    level="WARN",
                    line=f"preempted for job {pre.for_job_id}: {pre.reason}; checkpointing",
                )
            )
    for job_id, info in plan.waiting.items():
        waiting = jobs.get(str(job_id))
        if waiting is not None and waiting.state in ("queued", "compiling", "pending"):
            _explain(waiting, info)
    return sent


def _start(
    session: Session, job: Job, wafer_id: str, rect: tuple[int, int, int, int], deadline: datetime
) -> None:
    row, col, rows, cols = rect
    job.wafer_id, job.region_row, job.region_col, job.region_rows, job.region_cols = (
        wafer_id,
        row,
        col,
        rows,
        cols,
    )
    job.attempts += 1
    job.reason = None
    job.explain = None
    job.lease_owner, job.lease_expires_at = None, deadline
    transition(
        session,
        job,
        JobState.RUNNING,
        reason=f"placed on {wafer_id} at ({row},{col}) {rows}x{cols}",
    )
    session.add(
        JobAttempt(
            job_id=job.id,
            attempt=job.attempts,
            tenant_id=job.tenant_id,
            wafer_id=wafer_id,
            row=row,
            col=col,
            rows=rows,
            cols=cols,
            start_step=job.checkpoint_step or 0,
        )
    )
    session.add(
        JobLog(
            job_id=job.id,
            line=f"attempt {job.attempts}: region {rows}x{cols} at "
            f"({row},{col}) of wafer {wafer_id}",
        )
    )
    session.add(
        OutboxMessage(
            task="sam.run",
            queue=wafer_queue(wafer_id),
            payload={"job_id": job.id, "attempt": job.attempts},
        )
    )


def _explain(job: Job, info: JobExplain) -> None:
    eta = datetime.fromtimestamp(info.eta, UTC).isoformat() if info.eta is not None else None
    data: dict[str, Any] = {
        "position": info.position,
        "reasons": [{"code": r.code, "message": r.message} for r in info.reasons],
        "eta": eta,
        "priority": {
            "total": round(info.priority.total, 3),
            "factors": {k: round(v, 4) for k, v in info.priority.factors.items()},
            "weighted": {k: round(v, 3) for k, v in info.priority.weighted.items()},
        },
    }
    if job.explain != data:
        job.explain = data
        job.reason = info.reasons[0].code if info.reasons else None
