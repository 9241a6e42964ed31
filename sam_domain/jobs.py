"""A job's states and priority classes: the names the API, the policy, the services and the
workers share."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class JobState(StrEnum):
    """Where a job is in its life (sam_server/states.py holds the moves between them)."""

    QUEUED = "queued"
    COMPILING = "compiling"
    PENDING = "pending"
    RUNNING = "running"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


PriorityClass = Literal["low", "normal", "high", "urgent"]
"""A job's priority class; only an admin may submit `urgent`."""

PRIORITY_CLASSES: tuple[PriorityClass, ...] = ("low", "normal", "high", "urgent")
"""The classes in increasing order."""

CLASS_RANK: dict[str, int] = {name: rank for rank, name in enumerate(PRIORITY_CLASSES)}
"""Each class's rank; a job may only preempt jobs of a strictly lower rank."""
