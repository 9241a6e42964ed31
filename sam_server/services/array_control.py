"""Cancel, hold, release and requeue of a whole array, set-based (`bulk`): an array of 100,000
tasks changes in chunks of a few thousand rows, each its own short transaction, and never
loads its tasks as ORM objects.

The answer lists the first `LISTED` tasks changed and left as they were, with the counts of
both: an array's answer stays small whatever its size (the CLI prints the counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, case, null, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.services.auth import Principal
from sam_server.services.bulk import Pace, state_in, transition_many, update_many
from sam_server.states import ENDED, WAITING, JobState

LISTED = 1000  # tasks listed in each of an answer's `changed` and `unchanged`
HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")
_CANCEL_MOVES = {
    JobState.QUEUED: JobState.CANCELLED,
    JobState.COMPILING: JobState.CANCELLED,
    JobState.PENDING: JobState.CANCELLED,
    JobState.RUNNING: JobState.CANCELLING,
}


@dataclass
class ArrayTasks:
    """An array's tasks as the caller may see them: ids in index order, and whether the
    caller may change them (their user, or an admin of their tenant)."""

    array_id: str
    ids: list[str]
    states: dict[str, str]
    allowed: bool
    owner: str = ""


@dataclass
class BulkOutcome:
    """What a verb did to an array: the tasks changed (id, state, hold) and those left."""

    target: str
    changed: list[tuple[str, str, str | None]] = field(default_factory=list)
    unchanged: list[tuple[str, str]] = field(default_factory=list)
    changed_count: int = 0
    unchanged_count: int = 0

    def view(self) -> dict[str, object]:
        return {
            "id": self.target,
            "changed": [{"id": i, "state": s, "hold": h} for i, s, h in self.changed[:LISTED]],
            "unchanged": [{"id": i, "why": w} for i, w in self.unchanged[:LISTED]],
            "changed_count": self.changed_count,
            "unchanged_count": self.unchanged_count,
        }


def array_tasks(session: Session, principal: Principal, array_id: str) -> ArrayTasks | None:
    """The tasks of array `array_id` visible to the caller, or None when it names no array."""
    query = select(Job.id, Job.state, Job.user_id, Job.tenant_id).where(
        Job.array_job_id == array_id
    )
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    rows = session.execute(query.order_by(Job.array_task_id)).all()
    if not rows:
        return None
    users = {(r.user_id, r.tenant_id) for r in rows}
    allowed = all(
        principal.user_id == user or principal.manages_tenant(tenant) for user, tenant in users
    )
    owner = ""
    if not allowed:
        owner = session.get(Job, rows[0].id).user.name  # type: ignore[union-attr]
    return ArrayTasks(array_id, [r.id for r in rows], {r.id: r.state for r in rows}, allowed, owner)


def _outcome(
    session: Session,
    tasks: ArrayTasks,
    changed: list[tuple[str, str, str | None]],
    why: Callable[[Any], str],
) -> BulkOutcome:
    """The answer: `changed`, and why each other task was left (`why(row)`, read afresh for
    the listed ones only)."""
    done = {i for i, _, _ in changed}
    left = [i for i in tasks.ids if i not in done]
    outcome = BulkOutcome(tasks.array_id, changed, [], len(changed), len(left))
    if not tasks.allowed:
        message = (
            f"array {tasks.array_id} belongs to {tasks.owner}; only its user or an admin of its "
            "tenant may change it"
        )
        outcome.unchanged = [(i, message) for i in left[:LISTED]]
        return outcome
    listed = left[:LISTED]
    if listed:
        rows = session.execute(
            select(Job.id, Job.state, Job.hold, Job.preempt_requested).where(Job.id.in_(listed))
        ).all()
        by_id = {r.id: r for r in rows}
        outcome.unchanged = [(i, why(by_id[i])) for i in listed if i in by_id]
    return outcome


def cancel_array(
    session: Session, principal: Principal, tasks: ArrayTasks, pace: Pace
) -> BulkOutcome:
    """Every unfinished task: a waiting one ends at once, a running one goes to `cancelling`
    (its worker stops it at the next step boundary)."""
    by = f"cancelled by {principal.name}"
    changed: list[tuple[str, str, str | None]] = []
    if tasks.allowed:
        done = transition_many(
            session,
            tasks.ids,
            _CANCEL_MOVES,
            pace=pace,
            reason=by,
            values={"cancel_requested": True, "reason": None},
            log_line=by,
        )
        changed = [(i, state, None) for i, state in done.rows]
    return _outcome(session, tasks, changed, lambda row: f"already {row.state}")


def hold_array(
    session: Session, principal: Principal, tasks: ArrayTasks, pace: Pace
) -> BulkOutcome:
    """Hold every waiting task (an admin's hold replaces a user's)."""
    kind = "admin" if principal.is_admin else "user"
    changed: list[tuple[str, str, str | None]] = []
    if tasks.allowed:
        free = Job.hold.is_(None) | (Job.hold == "user") if kind == "admin" else Job.hold.is_(None)
        ids = update_many(
            session,
            tasks.ids,
            pace=pace,
            where=[state_in(WAITING), free],
            values={"hold": kind},
            log_line=f"held by {principal.name} ({kind} hold)",
        )
        changed = [(i, tasks.states[i], kind) for i in ids]

    def why(row: Any) -> str:
        if row.state not in WAITING:
            return f"job {row.id} is {row.state}; only a job that has not started can be held" + (
                "" if row.state in ENDED else " (`sam requeue --hold`)"
            )
        return "already held"

    return _outcome(session, tasks, changed, why)


def release_array(
    session: Session, principal: Principal, tasks: ArrayTasks, pace: Pace
) -> BulkOutcome:
    """Lift every task's hold (an admin's hold only for an admin)."""
    changed: list[tuple[str, str, str | None]] = []
    if tasks.allowed:
        held: list[ColumnElement[bool]] = [Job.hold.is_not(None)]
        if not principal.is_admin:
            held.append(Job.hold != "admin")
        was_held = Job.reason.in_(HELD_REASONS)
        ids = update_many(
            session,
            tasks.ids,
            pace=pace,
            where=held,
            # the next cycle explains a released job afresh
            values={
                "hold": None,
                "reason": case((was_held, null()), else_=Job.reason),
                "explain": case((was_held, null()), else_=Job.explain),
            },
            log_line=f"released by {principal.name}",
        )
        changed = [(i, tasks.states[i], None) for i in ids]

    def why(row: Any) -> str:
        if row.hold == "admin":
            return f"job {row.id} was held by an administrator; only one can release it"
        return "already released (not held)"

    return _outcome(session, tasks, changed, why)


def requeue_array(
    session: Session, principal: Principal, tasks: ArrayTasks, pace: Pace, *, hold_it: bool
) -> BulkOutcome:
    """Every running task checkpoints, gives its region back and waits again (held too with
    `hold_it`)."""
    kind = "admin" if principal.is_admin else "user"
    changed: list[tuple[str, str, str | None]] = []
    if tasks.allowed:
        values: dict[str, object] = {"preempt_requested": True}
        if hold_it:
            values["hold"] = kind
        ids = update_many(
            session,
            tasks.ids,
            pace=pace,
            where=[state_in([JobState.RUNNING.value]), Job.preempt_requested.is_(False)],
            values=values,
            log_line=f"requeued by {principal.name}; checkpointing, then waiting again",
        )
        changed = [(i, JobState.RUNNING.value, kind if hold_it else None) for i in ids]

    def why(row: Any) -> str:
        if row.state != JobState.RUNNING.value:
            return f"job {row.id} is {row.state}; only a running job can be requeued" + (
                " (an ended job is history: submit it again)" if row.state in ENDED else ""
            )
        return "already being requeued"

    return _outcome(session, tasks, changed, why)
