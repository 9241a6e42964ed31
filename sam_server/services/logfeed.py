"""What the log followers read: the database side of the API's log streams (`api.stream`).

One hub per server process polls these for every followed job at once; `ENDED` is the states
after which a stream ends ("gone": the job was deleted meanwhile).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobLog
from sam_server.services import observe
from sam_server.services.transitions import TERMINAL

ENDED = frozenset(s.value for s in TERMINAL) | {"gone"}


def max_log_id(session: Session, job_id: str) -> int:
    """The newest log line's id of `job_id` (0 when it has none)."""
    value = session.execute(select(func.max(JobLog.id)).where(JobLog.job_id == job_id)).scalar()
    return int(value or 0)


def read_new(
    session: Session, cursors: dict[str, int], seen_max: int, full: bool
) -> tuple[dict[str, str], dict[str, list[tuple[int, str]]], int]:
    """(ended jobs' states, new lines per job, the newest log id of all). Cheap when nothing
    happened: one indexed max() and the ended jobs only; every line and every job on `full`
    ticks (which also catch a line whose id committed out of order)."""
    ids = list(cursors)
    # The state is read before the lines: a job seen ended has every line it wrote visible.
    query = select(Job.id, Job.state).where(Job.id.in_(ids))
    if full:
        found = session.execute(query).tuples()
        # A job deleted meanwhile ends its streams too ("gone" is not a job state, only an end).
        states = {job_id: "gone" for job_id in ids} | {job_id: state for job_id, state in found}
    else:
        ended = session.execute(query.where(Job.state.in_(sorted(ENDED)))).tuples()
        states = {job_id: state for job_id, state in ended}
    newest = int(session.execute(select(func.max(JobLog.id))).scalar() or 0)
    rows: dict[str, list[tuple[int, str]]] = {}
    if newest <= seen_max and not full and not states:
        return states, rows, newest
    lines = (
        select(JobLog)
        .where(JobLog.job_id.in_(ids), JobLog.id > min(cursors.values()))
        .order_by(JobLog.id)
    )
    for line in session.execute(lines).scalars():
        if line.id > cursors[line.job_id]:
            rows.setdefault(line.job_id, []).append((line.id, observe.format_log(line)))
    return states, rows, newest


def catch_up(session: Session, job_id: str, after_id: int) -> tuple[str, list[tuple[int, str]]]:
    """The job's state ("gone" when deleted) and its lines after `after_id`."""
    job = session.get(Job, job_id)
    state = job.state if job is not None else "gone"
    query = select(JobLog).where(JobLog.job_id == job_id, JobLog.id > after_id)
    lines = session.execute(query.order_by(JobLog.id)).scalars()
    return state, [(line.id, observe.format_log(line)) for line in lines]
