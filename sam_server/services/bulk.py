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
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, String, Table, delete, insert, literal, select, update
from sqlalchemy.orm import Session

from sam_server.config import Settings
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


# A job's state in a chunk's conditions, as an expression no index serves: the rows are found
# by their ids (the primary key). With plain `state IN (...)`, SQLite chose the (state,
# created_at) index and scanned every queued job of the database for each chunk.
STATE = Job.state.concat("")


def state_in(states: Iterable[str]) -> ColumnElement[bool]:
    """`Job.state IN states` for a chunk's condition (see STATE)."""
    return STATE.in_(list(states))


@dataclass(frozen=True)
class Pace:
    """How a bulk change is cut: rows per transaction, the pause between transactions, and
    whether to commit between chunks (False: the caller's transaction holds everything)."""

    chunk_rows: int = 2000
    pause_s: float = 0.0
    commit: bool = True

    @classmethod
    def of(cls, settings: Settings, session: Session) -> Pace:
        """The settings' pace for `session`'s database (`bulk_pause_s` unset: 0.1 s on SQLite,
        where a writer blocks every other writer, none on PostgreSQL's row locks)."""
        pause = settings.api.bulk_pause_s
        if pause is None:
            pause = 0.1 if session.get_bind().dialect.name == "sqlite" else 0.0
        return cls(chunk_rows=min(settings.api.bulk_chunk_rows, MAX_CHUNK_ROWS), pause_s=pause)


@dataclass
class Changed:
    """What a bulk change did: (job id, state after) of each job changed, in chunk order."""

    rows: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [job_id for job_id, _ in self.rows]


def state_values(to: JobState, now: datetime) -> dict[str, object]:
    """The columns `transitions.transition` writes for a move to `to`, as SQL values (the row
    version bumped in SQL, so a worker's compare-and-set on the old version fails)."""
    values: dict[str, object] = {"state": to.value, "updated_at": now, "version": Job.version + 1}
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
    state passed through on the way (its event and reason recorded first).

    The events and log lines are written by INSERT ... SELECT over the very rows the UPDATE
    then changes (inside one write transaction on SQLite; on rows locked first on PostgreSQL),
    so no row travels through Python."""
    changed = Changed()
    groups: dict[JobState, list[str]] = {}
    for before, to in moves.items():
        groups.setdefault(to, []).append(before.value)

    def step(chunk: list[str], skip_locked: bool) -> list[str]:
        now = utcnow()
        done: list[str] = []
        for to, froms in groups.items():
            cond = [state_in(froms), *where]
            rows = _lock(session, chunk, cond, skip_locked)
            if not rows:
                continue
            picked = [Job.id.in_(rows), *cond]
            hops: list[tuple[JobState | None, JobState, str]] = [(None, to, reason)]
            if via is not None:
                hops = [(None, via[0], via[1])]
            if via is not None:
                hops.append((via[0], to, reason))
            for source, target, why in hops:
                origin = Job.state if source is None else literal(source.value, String)
                _insert_select(
                    session,
                    JobEvent,
                    {"job_id": Job.id, "at": _at(now), "from_state": origin},
                    {"to_state": target.value, "reason": why},
                    picked,
                )
            if log_line is not None:
                _log_lines(session, picked, log_line, now)
            stmt = update(Job).values(**state_values(to, now), **(values or {}))
            found = _update_returning(session, stmt, rows, cond)
            if found and to in TERMINAL:
                record_ends(session, found, now)
            changed.rows.extend((job_id, to.value) for job_id in found)
            done.extend(found)
        return done

    _in_chunks(session, list(ids), pace, step, still=[state_in(m.value for m in moves)])
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
        cond = list(where)
        rows = _lock(session, chunk, cond, skip_locked)
        if not rows:
            return []
        if log_line is not None:
            _log_lines(session, [Job.id.in_(rows), *cond], log_line, utcnow())
        stmt = update(Job).values(updated_at=utcnow(), **values)
        found = _update_returning(session, stmt, rows, cond)
        changed.extend(found)
        return found

    _in_chunks(session, list(ids), pace, step, still=list(where))
    return changed


def _at(now: datetime) -> ColumnElement[Any]:
    return literal(now, JobEvent.__table__.c.at.type)


def _insert_select(
    session: Session,
    model: Any,
    columns: Mapping[str, Any],
    constants: Mapping[str, Any],
    cond: list[ColumnElement[bool]],
) -> None:
    """INSERT INTO `model` (...) SELECT `columns`, `constants` FROM jobs WHERE `cond`."""
    table = model.__table__
    names = [*columns, *constants]
    picks = [*columns.values(), *(literal(v, table.c[k].type) for k, v in constants.items())]
    session.execute(insert(model).from_select(names, select(*picks).where(*cond)))


def _log_lines(session: Session, cond: list[ColumnElement[bool]], line: str, now: datetime) -> None:
    _insert_select(
        session, JobLog, {"job_id": Job.id, "at": _at(now)}, {"level": "INFO", "line": line}, cond
    )


def _lock(
    session: Session, chunk: list[str], cond: list[ColumnElement[bool]], skip_locked: bool
) -> list[str]:
    """The ids of `chunk` matching `cond`; on PostgreSQL locked for this transaction (those
    another transaction holds skipped when `skip_locked`). SQLite has no row locks: the whole
    chunk, whose first write takes the database's one write lock."""
    if session.get_bind().dialect.name != "postgresql":
        return chunk
    query = select(Job.id).where(Job.id.in_(chunk), *cond)
    return list(session.execute(query.with_for_update(skip_locked=skip_locked)).scalars())


def _update_returning(
    session: Session, stmt: Any, rows: list[str], cond: list[ColumnElement[bool]]
) -> list[str]:
    """Run `stmt` (an UPDATE of jobs) on the rows of `rows` that match `cond`; their ids."""
    stmt = stmt.where(Job.id.in_(rows), *cond)
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


def record_ends(session: Session, job_ids: Iterable[str], now: datetime) -> None:
    """The accounting records of jobs that just ended (what `accounting.record_job_end`
    writes for one job): one INSERT ... SELECT for those that never ran (no attempt: nothing
    to add up), the others computed from their attempts."""
    ids = list(job_ids)
    ran = list(
        session.execute(
            select(Job.id).where(Job.id.in_(ids), (Job.attempts > 0) | Job.started_at.is_not(None))
        ).scalars()
    )
    never = [Job.id.in_(ids), Job.attempts == 0, Job.started_at.is_(None)]
    table = cast(Table, JobAccounting.__table__)
    columns = {
        "job_id": Job.id,
        "array_job_id": Job.array_job_id,
        "array_task_id": Job.array_task_id,
        "tenant_id": Job.tenant_id,
        "tenant": Tenant.name,
        "user_id": Job.user_id,
        "user": User.name,
        "name": Job.name,
        "mode": Job.mode,
        "priority": Job.priority,
        "state": Job.state,
        "exit_kind": Job.error_kind,
        "submit_at": Job.created_at,
        "end_at": Job.finished_at,
        "time_limit_s": Job.time_limit_s,
        "attempts": Job.attempts,
    }
    constants = {"elapsed_s": 0.0, "pe_hours": 0.0, "intervals": [], "recorded_at": now}
    picks = [*columns.values(), *(literal(v, table.c[k].type) for k, v in constants.items())]
    query = (
        select(*picks)
        .join(Tenant, Tenant.id == Job.tenant_id)
        .join(User, User.id == Job.user_id)
        .where(*never)
    )
    session.execute(insert(JobAccounting).from_select([*columns, *constants], query))
    if ran:
        _record_ran(session, ran, now)


def _record_ran(session: Session, ids: list[str], now: datetime) -> None:
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
