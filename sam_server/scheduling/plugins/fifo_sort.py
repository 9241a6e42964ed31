"""`fifo_sort` (QueueSort): submit order (ties: id), as the EASY and FCFS anchors run.

Priorities are still computed when the cycle explains its waiting jobs (`sam explain` shows
them), with `FifoSortArgs.priority`; they never change the order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.points import PriorityOf, QueueSort
from sam_server.scheduling.model import PolicyJob, Snapshot
from sam_server.scheduling.plugins.priority_sort import PriorityArgs, fifo, priorities


@dataclass(frozen=True)
class FifoSortArgs:
    """- priority: the factors of the priorities shown (not used for the order)."""

    priority: PriorityArgs = field(default_factory=PriorityArgs)


@dataclass(frozen=True)
class FifoSort(QueueSort):
    name: ClassVar[str] = "fifo_sort"
    args: FifoSortArgs = field(default_factory=FifoSortArgs)

    def priorities(self, snapshot: Snapshot, now: float, needed: bool) -> PriorityOf | None:
        return priorities(snapshot, now, self.args.priority) if needed else None

    def order(self, waiting: list[PolicyJob], priority: PriorityOf | None) -> list[PolicyJob]:
        return fifo(waiting)
