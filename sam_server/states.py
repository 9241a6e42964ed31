"""The job states: one pure home (no database, no framework) for the enum, the transition table
and the named sets every part asks about. The services (`services/transitions.py` is the one
writer of a job's state), the policy, the scheduler loop and the workers all import them from
here. The client keeps its own copy of the names (it is a separate, light distribution).
"""

from __future__ import annotations

from enum import StrEnum

from sam_domain.jobs import JobState

__all__ = ["JobState"]  # the enum is the shared vocabulary's (sam_domain); the moves are here


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE = frozenset(JobState) - TERMINAL

# from-state -> the states it may move to. Requeues (compiling -> queued, running -> pending) are
# how lost workers and preemption give a job back to the scheduler.
ALLOWED: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.COMPILING, JobState.CANCELLED, JobState.FAILED}),
    JobState.COMPILING: frozenset(
        {JobState.PENDING, JobState.QUEUED, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLING, JobState.PENDING}
    ),
    JobState.CANCELLING: frozenset({JobState.CANCELLED, JobState.SUCCEEDED, JobState.FAILED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class RunEnd(StrEnum):
    """How one run (attempt) of a job on a wafer ended, as its worker reports it; the services
    turn it into the job's next state (preempted: back to pending; lost: the lease was lost and
    the run's result is not recorded)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    LOST = "lost"


def can_transition(from_state: str, to_state: str) -> bool:
    """Whether the table allows `from_state` -> `to_state`."""
    return JobState(to_state) in ALLOWED[JobState(from_state)]


def _values(*states: JobState) -> tuple[str, ...]:
    return tuple(s.value for s in states)


# The named sets, as plain strings (usable in SQL `IN` and against the policy's literals).
WAITING = _values(JobState.QUEUED, JobState.COMPILING, JobState.PENDING)  # not yet running
HOLDS_REGION = _values(JobState.RUNNING, JobState.CANCELLING)  # a region on a wafer is theirs
LEASED = _values(JobState.COMPILING, JobState.RUNNING, JobState.CANCELLING)  # a worker has it
ENDED = _values(JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)  # TERMINAL, as strings
