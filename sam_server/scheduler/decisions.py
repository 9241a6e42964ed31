"""Write a `Plan` into the database: transitions, regions, explain data and outbox messages.

All of it happens in the caller's transaction; the messages are sent only after it commits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, bindparam, text, update
from sqlalchemy.orm import Session

from sam_server.broker import COMPILE_QUEUE, COMPILE_TASK, RUN_TASK, wafer_queue
from sam_server.db.models import Job, JobAttempt, JobLog, OutboxMessage
from sam_server.db.types import utcnow
from sam_server.scheduling import JobExplain, Plan
from sam_server.services.transitions import transition
from sam_server.states import WAITING, JobState

# Explanations written each cycle: the first EXPLAIN_DEPTH waiting jobs in queue order (what
# `sam queue` shows first), every job whose first reason changed, and a rotating slice of
# EXPLAIN_REFRESH others, so at 100,000 waiting jobs a cycle does not rewrite 100,000 rows
# (each stored explanation carries the time it was planned).
EXPLAIN_DEPTH = 1000
EXPLAIN_REFRESH = 2000
_refresh_cursor = {"at": 0}


def apply_plan(
    session: Session,
    plan: Plan,
    jobs: Mapping[str, Any],
    *,
    dispatch_timeout_s: float,
    selection: ExplainSelection | None = None,
) -> int:
    """Apply every decision of `plan`; returns how many messages were queued for dispatch.
    `jobs` are the cycle's rows of the active jobs (their `reason` decides which explanations
    are rewritten); the jobs a decision changes are loaded here."""
    sent = 0
    deadline = utcnow() + timedelta(seconds=dispatch_timeout_s)
    for job_id in plan.compiles:
        job = session.get(Job, str(job_id))
        if job is not None and job.state == JobState.QUEUED.value:
            job.reason, job.lease_owner, job.lease_expires_at = "Compiling", None, deadline
            transition(session, job, JobState.COMPILING, reason="sent to a compile server")
            session.add(
                OutboxMessage(task=COMPILE_TASK, queue=COMPILE_QUEUE, payload={"job_id": job.id})
            )
            sent += 1
    for start in plan.starts:
        job = session.get(Job, str(start.job_id))
        if job is not None and job.state == JobState.PENDING.value:
            _start(
                session,
                job,
                start.wafer_id,
                (start.row, start.col, start.rows, start.cols),
                deadline,
            )
            sent += 1
    for pre in plan.preemptions:
        job = session.get(Job, str(pre.job_id))
        if job is not None and job.state == JobState.RUNNING.value and not job.preempt_requested:
            job.preempt_requested = True
            session.add(
                JobLog(
                    job_id=job.id,
                    level="WARN",
                    line=f"preempted for job {pre.for_job_id}: {pre.reason}; checkpointing",
                )
            )
    session.flush()
    write_explanations(session, plan, jobs, selection)
    return sent


class ExplainSelection:
    """Which waiting jobs a cycle explains (`plan(explain_only=...)`) and then stores: the
    first EXPLAIN_DEPTH in queue order, this cycle's slice of EXPLAIN_REFRESH, and every job
    whose row changed since the last cycle or was never explained (deeper in the queue a job's
    first reason follows from its state: only a changed row can change it; the slice refreshes
    the rest). `jobs` are the cycle's rows (`snapshot.ActiveJob`, `fresh` when re-read)."""

    def __init__(self, jobs: Mapping[str, Any], waiting: int) -> None:
        cursor = _refresh_cursor["at"] if _refresh_cursor["at"] < waiting else EXPLAIN_DEPTH
        self.window = range(cursor, cursor + EXPLAIN_REFRESH)
        _refresh_cursor["at"] = cursor + EXPLAIN_REFRESH
        self.depth = EXPLAIN_DEPTH
        self.changed = {
            key for key, row in jobs.items() if row.reason is None or getattr(row, "fresh", True)
        }

    def __call__(self, position: int, job: Any) -> bool:
        k = position - 1
        return k < self.depth or k in self.window or str(job.id) in self.changed


def write_explanations(
    session: Session, plan: Plan, jobs: Mapping[str, Any], selection: ExplainSelection | None = None
) -> int:
    """Store the explanations chosen (see ExplainSelection) in one batched UPDATE; returns how
    many. `plan.waiting` holds the explained jobs, keyed in queue order."""
    decided = {str(j) for j in plan.compiles} | {str(s.job_id) for s in plan.starts}
    selection = selection or ExplainSelection(jobs, len(plan.waiting))
    depth, window = selection.depth, selection.window
    planned_at = utcnow().isoformat()
    rows = []
    for job_id, info in plan.waiting.items():
        key = str(job_id)
        row = jobs.get(key)
        if row is None or key in decided or row.state not in WAITING:
            continue
        k = info.position - 1
        code = info.reasons[0].code if info.reasons else None
        if k < depth or k in window or code != row.reason:
            rows.append({"_id": key, "explain": _explain(info, planned_at), "reason": code})
    store_explanations(session, rows)
    return len(rows)


def store_explanations(session: Session, rows: list[dict[str, Any]]) -> None:
    """Write `{_id, explain, reason}` rows in one batched UPDATE (no ORM objects loaded)."""
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
            task=RUN_TASK,
            queue=wafer_queue(wafer_id),
            payload={"job_id": job.id, "attempt": job.attempts},
        )
    )


def _explain(info: JobExplain, planned_at: str) -> dict[str, Any]:
    eta = datetime.fromtimestamp(info.eta, UTC).isoformat() if info.eta is not None else None
    return {
        "position": info.position,
        "reasons": [{"code": r.code, "message": r.message} for r in info.reasons],
        "eta": eta,
        "priority": {
            "total": round(info.priority.total, 3),
            "factors": {k: round(v, 4) for k, v in info.priority.factors.items()},
            "weighted": {k: round(v, 3) for k, v in info.priority.weighted.items()},
        },
        "planned_at": planned_at,
    }
