"""The scheduler loop's verbs: every database write a planning cycle makes, by name.

The loop (`sam_server/controller/`) decides what to do (reap, gate, plan); these functions do it,
in the caller's transaction: `send_to_compile`, `start_job`, `preempt_job`, `requeue_lost`,
`cancel_unsatisfiable`, `charge_usage`, `store_explanations` and `mark_sent`. A state change goes
through `transitions.transition` (the one writer of a job's state); a message for a worker is an
outbox row (sent by the loop only after the commit, with the names of `sam_server.broker`).

They take already-loaded rows and add no query of their own (except the batched ones named
below), so a cycle costs what it did when the loop wrote the rows itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, select, text, update
from sqlalchemy.orm import Session

from sam_domain.geometry import Rect
from sam_server.broker import COMPILE_QUEUE, COMPILE_TASK, RUN_TASK, wafer_queue
from sam_server.db.models import Job, JobAttempt, JobLog, OutboxMessage, Tenant, User
from sam_server.db.types import as_utc, utcnow
from sam_server.scheduling import update_usage
from sam_server.services.transitions import transition
from sam_server.states import HOLDS_REGION, JobState, RunEnd


def send_to_compile(session: Session, job: Job, *, deadline: datetime) -> None:
    """Queued -> compiling: a compile server must claim the job before `deadline`."""
    job.reason, job.lease_owner, job.lease_expires_at = "Compiling", None, deadline
    transition(session, job, JobState.COMPILING, reason="sent to a compile server")
    session.add(OutboxMessage(task=COMPILE_TASK, queue=COMPILE_QUEUE, payload={"job_id": job.id}))


def start_job(session: Session, job: Job, wafer_id: str, rect: Rect, *, deadline: datetime) -> None:
    """Pending -> running on region `rect` of `wafer_id`: a new attempt (its row, a log line and
    the wafer worker's message); the worker must claim it before `deadline`."""
    row, col, rows, cols = rect
    job.wafer_id, job.region_row, job.region_col = wafer_id, row, col
    job.region_rows, job.region_cols = rows, cols
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
            task=RUN_TASK,
            queue=wafer_queue(wafer_id),
            payload={"job_id": job.id, "attempt": job.attempts},
        )
    )


def preempt_job(session: Session, job: Job, *, for_job_id: object, why: str) -> None:
    """Ask a running job's worker to checkpoint and give its region back (the worker sees the
    flag; the job returns to pending when the run ends as preempted)."""
    job.preempt_requested = True
    job.preempted_for = str(for_job_id)
    session.add(
        JobLog(
            job_id=job.id,
            level="WARN",
            line=f"preempted for job {for_job_id}: {why}; checkpointing",
        )
    )


def requeue_lost(session: Session, job: Job, *, max_attempts: int) -> None:
    """A leased job whose lease expired (its worker died or never picked it up): end its attempt
    as lost, then requeue it (compiling -> queued, running -> pending), or cancel it if it was
    cancelling, or fail it with `worker_lost` once it was lost `max_attempts` times."""
    who = job.lease_owner or "no worker picked it up"
    _end_attempt_lost(session, job)
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


def _end_attempt_lost(session: Session, job: Job) -> None:
    row = session.execute(
        select(JobAttempt).where(JobAttempt.job_id == job.id, JobAttempt.attempt == job.attempts)
    ).scalar_one_or_none()
    if row is not None and row.ended_at is None:
        row.ended_at = utcnow()
        row.outcome = RunEnd.LOST.value


def cancel_unsatisfiable(session: Session, job: Job, *, why: str) -> None:
    """Cancel a waiting job whose dependency can never be satisfied (`kill_invalid_depend`)."""
    job.cancel_requested = True
    session.flush()
    message = f"dependency can never be satisfied ({why}); cancelled (kill_invalid_depend)"
    transition(session, job, JobState.CANCELLED, reason=message)
    job.reason = "DependencyNeverSatisfied"
    session.add(JobLog(job_id=job.id, level="WARN", line=message))


def charge_usage(session: Session, jobs: list[Any], *, half_life_s: float) -> None:
    """Fair share: advance every tenant's (and user's) decayed usage to now, adding the PEs the
    region holders among `jobs` (the cycle's rows) held since the last charge."""
    now = utcnow()
    tenant_pes: dict[int, float] = defaultdict(float)
    user_pes: dict[int, float] = defaultdict(float)
    for job in jobs:
        if job.state in HOLDS_REGION and job.region_rows and job.region_cols:
            tenant_pes[job.tenant_id] += job.region_rows * job.region_cols
            user_pes[job.user_id] += job.region_rows * job.region_cols
    for tenant in session.execute(select(Tenant)).scalars():
        last = as_utc(tenant.usage_at) or now
        elapsed = max(0.0, (now - last).total_seconds())
        tenant.usage_pe_s = update_usage(
            tenant.usage_pe_s, tenant_pes[tenant.id], elapsed, half_life_s
        )
        tenant.usage_at = now
        users = session.execute(select(User).where(User.tenant_id == tenant.id)).scalars()
        for user in users:
            user.usage_pe_s = update_usage(user.usage_pe_s, user_pes[user.id], elapsed, half_life_s)


def store_explanations(session: Session, rows: Sequence[Mapping[str, object]]) -> None:
    """Write `{_id, explain, reason}` rows (why each waiting job waits) in one batched UPDATE,
    no ORM objects loaded."""
    if not rows:
        return
    if session.get_bind().dialect.name == "postgresql":
        # One statement over one JSON document: an executemany of 3,000 rows cost 0.6 s of a
        # cycle (and text arrays are escaped element by element by the driver).
        doc = [{"id": r["_id"], "explain": r["explain"], "reason": r["reason"]} for r in rows]
        session.execute(_PG_EXPLAIN, {"doc": json.dumps(doc)})
    else:
        table: Table = Job.__table__  # type: ignore[assignment]
        session.execute(
            update(table)
            .where(table.c.id == bindparam("_id"))
            .values(explain=bindparam("explain"), reason=bindparam("reason")),
            rows,
        )


_PG_EXPLAIN = text(
    "UPDATE jobs SET explain = v.explain, reason = v.reason"
    " FROM json_to_recordset(CAST(:doc AS json)) AS v(id text, explain json, reason text)"
    " WHERE jobs.id = v.id"
)


def unsent_messages(session: Session) -> list[OutboxMessage]:
    """The outbox messages not yet handed to the broker, oldest first."""
    return list(
        session.execute(
            select(OutboxMessage).where(OutboxMessage.sent_at.is_(None)).order_by(OutboxMessage.id)
        ).scalars()
    )


def mark_sent(session: Session, message: OutboxMessage) -> None:
    """Record that the broker took `message` (committed at once, so it is never sent twice)."""
    message.sent_at = utcnow()
    session.commit()
