"""`priority_sort` (QueueSort): higher priority first, then earlier eligible, submitted, id.

The priority is a weighted sum of factors (`priority.PriorityCalculator`: class, fair share,
age, size). Sorted in two stable passes with the same result as one sort by the whole key: the
jobs in their time-invariant order (eligible, submitted, id; kept between cycles by
`static_order.STATIC`, so only new jobs are sorted in), then by priority alone. Priorities are
computed once per group of jobs equal in every field but the id (an array's tasks), and the
priority pass runs on an input already ordered within each class (age keeps order), where the
sort finds long runs instead of comparing 100,000 key tuples n log n times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

from sam_server.scheduling.framework.points import PriorityOf, QueueSort
from sam_server.scheduling.model import PolicyJob, PriorityWeights, Snapshot
from sam_server.scheduling.priority import PriorityCalculator
from sam_server.scheduling.static_order import STATIC


@dataclass(frozen=True)
class PriorityArgs:
    """The priority factors' arguments.

    - weights: each factor's weight (class dominates, then fair share, age, size).
    - half_life_s: the decay of a tenant's recorded usage (fair share).
    - age_cap_s: the wait at which the age factor reaches 1.
    - favor_small: the size factor favours short jobs, by time limit (True), or large PE counts.
    - size_horizon_s: a time limit this long or longer scores 0 on size.
    - user_share_weight: how much the user's share within the tenant moves the fair share.
    """

    weights: PriorityWeights = field(default_factory=PriorityWeights)
    half_life_s: float = 7 * 86400.0
    age_cap_s: float = 7 * 86400.0
    favor_small: bool = True
    size_horizon_s: float = 86400.0
    user_share_weight: float = 0.25


def priorities(snapshot: Snapshot, now: float, args: PriorityArgs) -> PriorityOf:
    """Each job's priority breakdown at `now` (shared per equal job within one `now`)."""
    cluster_pes = sum(w.rows * w.cols for w in snapshot.wafers if w.online)
    calc = PriorityCalculator(snapshot.tenants, cluster_pes, args)
    return partial(calc.breakdown, now=now)


def fifo(waiting: list[PolicyJob]) -> list[PolicyJob]:
    """Submit order (ties: id)."""
    return sorted(waiting, key=lambda j: (j.submitted_at, j.id))


@dataclass(frozen=True)
class PrioritySort(QueueSort):
    name: ClassVar[str] = "priority_sort"
    args: PriorityArgs = field(default_factory=PriorityArgs)

    def priorities(self, snapshot: Snapshot, now: float, needed: bool) -> PriorityOf | None:
        return priorities(snapshot, now, self.args)

    def order(self, waiting: list[PolicyJob], priority: PriorityOf | None) -> list[PolicyJob]:
        if priority is None:
            return fifo(waiting)
        static, groups, members = STATIC.order(waiting)
        by_group = [-priority(m).total for m in members]
        totals = list(map(by_group.__getitem__, groups))
        return list(map(static.__getitem__, sorted(range(len(static)), key=totals.__getitem__)))
