"""Set-based changes of many jobs at once: an array's cancel, hold, release and requeue, and the
scheduler's artifact reuse. One UPDATE per chunk of ids (not one ORM round trip per job), each
chunk its own short transaction, with a pause between chunks so that other tenants' requests and
the scheduler's cycle get the database in between (SQLite has one writer).

On PostgreSQL a chunk skips the rows another transaction holds (`FOR UPDATE SKIP LOCKED`: a
worker claiming or finishing that very task) and comes back for them after the other chunks,
instead of waiting on them or answering 409 "changed concurrently".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, update
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobAccounting, JobEvent, JobLog, Tenant, User
from sam_server.db.types import utcnow
from sam_server.services.accounting import _attempts_of, record_values
from sam_server.states import TERMINAL, JobState

# SQLite's bound-parameter limit is 32,766 on older builds (65,535 asked, the lower one kept):
# a chunk's ids plus the statement's own values must stay under it.
MAX_CHUNK_ROWS = 30_000
# Passes over the rows a PostgreSQL chunk skipped because another transaction held them; the
# last pass waits for the lock instead of skipping.
LOCKED_PASSES = 4


@dataclass(frozen=True)
class Pace:
    """How a bulk change is cut: rows per transaction, the pause between transactions, and
    whether to commit between chunks (False: the caller's transaction holds everything)."""

    chunk_rows: int = 2000
    pause_s: float = 0.0
    commit: bool = True

    @classmethod
    def of(cls, settings: Any, session: Session) -> Pace:
        """The settings' pace for `session`'s database (`bulk_pause_s` unset: 0.1 s on SQLite,
        where a writer blocks every other writer, none on PostgreSQL's row locks)."""
        pause = settings.bulk_pause_s
        if pause is None:
            pause = 0.1 if session.get_bind().dialect.name == "sqlite" else 0.0
        return cls(chunk_rows=min(settings.bulk_chunk_rows, MAX_CHUNK_ROWS), pause_s=pause)


@dataclass
class Changed:
    """What a bulk change did: (job id, state before) of each job changed, in chunk order."""

    rows: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [job_id for job_id, _ in self.rows]


def state_values(to: JobState, now: Any) -> dict[str, Any]:
    """The columns `transitions.transition` writes for a move to `to`, as SQL values (the row
    version bumped in SQL, so a worker's compare-and-set on the old version fails)."""
    values: dict[str, Any] = {"state": to.value, "updated_at": now, "version": Job.version + 1}
    if to in TERMINAL:
        values["finished_at"] = now
    if to in TERMINAL or to in (JobState.PENDING, JobState.QUEUED):
        values.update(wafer_id=None, region_row=None, region_col=None)
        values.update(region_rows=None, region_cols=None, lease_owner=None, lease_expires_at=None)
    return values


def transition_many(
    session: Session,
    ids: Sequence[str],
    moves: Mapping[JobState, JobState],
    *,
    pace: Pace,
    reason: str,
    values: Mapping[str, Any] | None = None,
    log_line: str | None = None,
    where: Sequence[ColumnElement[bool]] = (),
    via: tuple[JobState, str] | None = None,
) -> Changed:
    """Move each job of `ids` that is in a from-state of `moves` to its to-state (ALLOWED is
    the caller's to respect), with `values` also set; records each change's `JobEvent` (with
    `reason`), a `log_line` in its log and, for an ended job, its accounting record. Jobs in
    no from-state (ended since, say) are left as they are and not in the answer. `via`: a
    state passed through on the way (its event and reason recorded first)."""
    changed = Changed()

    def step(chunk: list[str], skip_locked: bool) -> list[str]:
        now = utcnow()
        done: list[tuple[str, str]] = []
        for before, to in moves.items():
            cond = [Job.state == before.value, *where]
            stmt = update(Job).values(**state_values(to, now), **(values or {}))
            found = _update_returning(session, stmt, chunk, cond, skip_locked)
            done.extend((job_id, before.value) for job_id in found)
            steps = [(before, to, reason)]
            if via is not None:
                steps = [(before, via[0], via[1]), (via[0], to, reason)]
            events = [
                {"job_id": i, "at": now, "from_state": a.value, "to_state": b.value, "reason": why}
                for a, b, why in steps
                for i in found
            ]
            if events:
                session.execute(insert(JobEvent), events)
            if found and to in TERMINAL:
                record_ends(session, found, now)
        if log_line is not None and done:
            session.execute(insert(JobLog), [{"job_id": i, "line": log_line} for i, _ in done])
        changed.rows.extend(done)
        return [job_id for job_id, _ in done]

    _in_chunks(session, list(ids), pace, step, still=[Job.state.in_([m.value for m in moves])])
    return changed


def update_many(
    session: Session,
    ids: Sequence[str],
    *,
    pace: Pace,
    where: Sequence[ColumnElement[bool]],
    values: Mapping[str, Any],
    log_line: str | None = None,
) -> list[str]:
    """Set `values` on each job of `ids` that matches `where` (no state change), writing a
    `log_line` in each changed job's log; returns the ids changed."""
    changed: list[str] = []

    def step(chunk: list[str], skip_locked: bool) -> list[str]:
        stmt = update(Job).values(updated_at=utcnow(), **values)
        found = _update_returning(session, stmt, chunk, list(where), skip_locked)
        if log_line is not None and found:
            session.execute(insert(JobLog), [{"job_id": i, "line": log_line} for i in found])
        changed.extend(found)
        return found

    _in_chunks(session, list(ids), pace, step, still=list(where))
    return changed


def _update_returning(
    session: Session,
    stmt: Any,
    chunk: list[str],
    cond: list[ColumnElement[bool]],
    skip_locked: bool,
) -> list[str]:
    """Run `stmt` (an UPDATE of jobs) on the rows of `chunk` that match `cond`; their ids."""
    if session.get_bind().dialect.name == "postgresql":
        locked = (
            select(Job.id).where(Job.id.in_(chunk), *cond).with_for_update(skip_locked=skip_locked)
        )
        stmt = stmt.where(Job.id.in_(locked.scalar_subquery()))
    else:
        stmt = stmt.where(Job.id.in_(chunk), *cond)
    stmt = stmt.returning(Job.id).execution_options(synchronize_session=False)
    return list(session.execute(stmt).scalars())


def _in_chunks(
    session: Session,
    ids: list[str],
    pace: Pace,
    step: Callable[[list[str], bool], list[str]],
    *,
    still: list[ColumnElement[bool]],
) -> None:
    """Run `step(chunk, skip_locked)` on each chunk of `ids`, each chunk a transaction of its
    own (when `pace.commit`) followed by `pace.pause_s`. On PostgreSQL, the rows a chunk
    skipped (locked elsewhere) and that still match `still` get more passes, the last waiting
    for the locks."""
    postgres = session.get_bind().dialect.name == "postgresql"
    left: list[str] = []
    first = True
    for start in range(0, len(ids), pace.chunk_rows):
        if not first and pace.pause_s > 0:
            time.sleep(pace.pause_s)
        first = False
        chunk = ids[start : start + pace.chunk_rows]
        done = set(step(chunk, postgres))
        if pace.commit:
            session.commit()
        if postgres:
            left.extend(i for i in chunk if i not in done)
    for attempt in range(LOCKED_PASSES if postgres else 0):
        left = _matching(session, left, still, pace.chunk_rows)
        if not left:
            return
        time.sleep(0.05 * 2**attempt)
        last = attempt == LOCKED_PASSES - 1
        again: list[str] = []
        for start in range(0, len(left), pace.chunk_rows):
            chunk = left[start : start + pace.chunk_rows]
            done = set(step(chunk, not last))
            if pace.commit:
                session.commit()
            again.extend(i for i in chunk if i not in done)
        left = again


def _matching(
    session: Session, ids: list[str], cond: list[ColumnElement[bool]], chunk_rows: int
) -> list[str]:
    """The ids of `ids` whose rows still match `cond` (read without locks)."""
    found: list[str] = []
    for start in range(0, len(ids), chunk_rows):
        chunk = ids[start : start + chunk_rows]
        found.extend(session.execute(select(Job.id).where(Job.id.in_(chunk), *cond)).scalars())
    return found


_RECORD_COLUMNS = (
    Job.id,
    Job.array_job_id,
    Job.array_task_id,
    Job.tenant_id,
    Job.user_id,
    Job.name,
    Job.mode,
    Job.priority,
    Job.state,
    Job.error_kind,
    Job.created_at,
    Job.started_at,
    Job.finished_at,
    Job.time_limit_s,
    Job.attempts,
)


def record_ends(session: Session, job_ids: Iterable[str], now: Any) -> None:
    """The accounting records of jobs that just ended, written in two statements (what
    `accounting.record_job_end` writes for one job)."""
    ids = list(job_ids)
    rows = session.execute(
        select(*_RECORD_COLUMNS, Tenant.name.label("tenant_name"), User.name.label("user_name"))
        .join(Tenant, Tenant.id == Job.tenant_id)
        .join(User, User.id == Job.user_id)
        .where(Job.id.in_(ids))
    ).all()
    attempts = _attempts_of(session, ids)
    records = [
        record_values(
            row, tenant=row.tenant_name, user=row.user_name, attempts=attempts[row.id], now=now
        )
        for row in rows
    ]
    session.execute(delete(JobAccounting).where(JobAccounting.job_id.in_(ids)))
    if records:
        session.execute(insert(JobAccounting), records)
