"""Write a `Plan` into the database through the dispatch verbs (`services/dispatch.py`:
`send_to_compile`, `start_job`, `preempt_job`, `store_explanations`), choosing here which
explanations a cycle rewrites.

All of it happens in the caller's transaction; the messages are sent only after it commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.db.types import utcnow
from sam_server.scheduling import JobExplain, Plan
from sam_server.services.dispatch import (
    preempt_job,
    send_to_compile,
    start_job,
    store_explanations,
)
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
    # One compile per compile hash: a job identical to one compiling (or chosen before it)
    # waits queued and takes that artifact (`reuse`) when it is done, in the same cycle as the
    # first becomes pending, so the two are then placed in queue order. Compiled side by side,
    # the later one could finish first and start ahead (and take the tenant's quota).
    compiling = {
        j.compile_hash
        for j in jobs.values()
        if j.state == JobState.COMPILING.value and j.compile_hash
    }
    for job_id in plan.compiles:
        job = session.get(Job, str(job_id))
        if job is not None and job.state == JobState.QUEUED.value:
            if job.compile_hash and job.compile_hash in compiling:
                continue
            if job.compile_hash:
                compiling.add(job.compile_hash)
            send_to_compile(session, job, deadline=deadline)
            sent += 1
    for start in plan.starts:
        job = session.get(Job, str(start.job_id))
        if job is not None and job.state == JobState.PENDING.value:
            rect = (start.row, start.col, start.rows, start.cols)
            start_job(session, job, start.wafer_id, rect, deadline=deadline)
            sent += 1
    for pre in plan.preemptions:
        job = session.get(Job, str(pre.job_id))
        if job is not None and job.state == JobState.RUNNING.value and not job.preempt_requested:
            preempt_job(session, job, for_job_id=pre.for_job_id, why=pre.reason)
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

    def __call__(self, jobs: Sequence[Any]) -> list[int]:
        """The indexes in `jobs` (queue order) to explain, ascending: the first `depth`, this
        cycle's window, and every changed job (one call per plan, not one per job)."""
        n = len(jobs)
        chosen = set(range(min(self.depth, n)))
        chosen.update(range(self.window.start, min(self.window.stop, n)))
        if self.changed:
            changed = self.changed
            chosen.update(k for k, job in enumerate(jobs) if str(job.id) in changed)
        return sorted(chosen)


def write_explanations(
    session: Session, plan: Plan, jobs: Mapping[str, Any], selection: ExplainSelection | None = None
) -> int:
    """Store the explanations chosen (see ExplainSelection) in one batched UPDATE; returns how
    many. `plan.waiting` holds the explained jobs, keyed in queue order."""
    decided = {str(j) for j in plan.compiles} | {str(s.job_id) for s in plan.starts}
    selection = selection or ExplainSelection(jobs, len(plan.waiting))
    depth, window = selection.depth, selection.window
    planned_at = utcnow().isoformat()
    priorities: dict[int, dict[str, Any]] = {}  # jobs equal in every factor share one breakdown
    rows = []
    for job_id, info in plan.waiting.items():
        key = str(job_id)
        row = jobs.get(key)
        if row is None or key in decided or row.state not in WAITING:
            continue
        k = info.position - 1
        code = info.reasons[0].code if info.reasons else None
        if k < depth or k in window or code != row.reason:
            explain = _explain(info, planned_at, priorities)
            rows.append({"_id": key, "explain": explain, "reason": code})
    store_explanations(session, rows)
    return len(rows)


def _explain(
    info: JobExplain, planned_at: str, priorities: dict[int, dict[str, Any]]
) -> dict[str, object]:
    """The stored explain document; `priorities` memoizes each breakdown's part (by object:
    the plan holds them all while the cycle writes)."""
    eta = datetime.fromtimestamp(info.eta, UTC).isoformat() if info.eta is not None else None
    prio = info.priority
    priority = priorities.get(id(prio))
    if priority is None:
        priority = priorities[id(prio)] = {
            "total": round(prio.total, 3),
            "factors": {k: round(v, 4) for k, v in prio.factors.items()},
            "weighted": {k: round(v, 3) for k, v in prio.weighted.items()},
        }
    return {
        "position": info.position,
        "reasons": [{"code": r.code, "message": r.message} for r in info.reasons],
        "eta": eta,
        "priority": priority,
        "planned_at": planned_at,
    }
