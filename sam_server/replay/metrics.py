"""The figures `sam sim` prints: wait, bounded slowdown, utilization, makespan, fairness."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from sam_server.replay.swf import TraceJob
from sam_server.scheduling.fairshare import bounded_slowdown

if TYPE_CHECKING:
    from sam_server.replay.sim import ClusterSpec


@dataclass(frozen=True)
class SimResult:
    """The outcome of one replay (docs/contract.md section 3 fields first, then extras)."""

    policy: str
    jobs: int
    makespan_s: float
    utilization: float
    avg_wait_s: float
    p95_wait_s: float
    max_wait_s: float
    avg_bounded_slowdown: float
    fairness_jain: float
    rejected: int = 0
    unfinished: int = 0
    preemptions: int = 0
    migrations: int = 0
    moved_cost_s: float = 0.0
    """Seconds of lost steps plus checkpoint and restart time charged to migrated jobs, and
    checkpoint and restart time charged to preempted (suspended) ones."""

    def as_dict(self) -> dict[str, object]:
        """The result as a JSON-ready dict."""
        return asdict(self)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2), in (0, 1]; 1 for one value or none."""
    if not values:
        return 1.0
    square_sum = sum(v * v for v in values)
    if square_sum == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square_sum)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-th percentile (q in [0, 100]) of `values`; 0 when empty."""
    if not values:
        return 0.0
    ranked = sorted(values)
    k = max(1, math.ceil(q / 100.0 * len(ranked)))
    return ranked[k - 1]


def summarize(
    trace: Mapping[int, TraceJob],
    shapes: Mapping[int, tuple[int, int]],
    first_start: Mapping[int, float],
    finish: Mapping[int, float],
    spec: ClusterSpec,
    rejected: int,
    preemptions: int,
    policy: str = "",
    migrations: int = 0,
    moved_cost_s: float = 0.0,
) -> SimResult:
    """Metrics over the finished jobs. Bounded slowdown is from submit to end, so the time a
    preempted or migrated job lost counts. Fairness: Jain's index over users' mean bounded slowdown.

    Utilization is PE-seconds held by jobs (region area x run time) over the cluster's PEs times
    the makespan (first submit to last end).
    """
    done = [j for j in trace if j in finish]
    waits = [first_start[j] - trace[j].submit_s for j in done]
    # a job moved or preempted ends later than wait + run: its slowdown counts the delay
    delayed = [finish[j] - trace[j].submit_s - trace[j].run_s for j in done]
    slow = [bounded_slowdown(d, trace[j].run_s) for d, j in zip(delayed, done, strict=True)]
    per_user: dict[str, list[float]] = {}
    for s, j in zip(slow, done, strict=True):
        per_user.setdefault(trace[j].user, []).append(s)
    begin = min((trace[j].submit_s for j in trace), default=0.0)
    makespan = max(finish.values(), default=begin) - begin
    # a moldable job on fewer PEs than asked holds them longer: it did its asked PEs' work
    asked = {j: trace[j].procs * spec.pes_per_proc for j in done}
    work = sum(max(shapes[j][0] * shapes[j][1], asked[j]) * trace[j].run_s for j in done)
    capacity = spec.wafers * spec.rows * spec.cols * makespan
    return SimResult(
        policy=policy,
        jobs=len(done),
        makespan_s=makespan,
        utilization=work / capacity if capacity > 0 else 0.0,
        avg_wait_s=sum(waits) / len(waits) if waits else 0.0,
        p95_wait_s=percentile(waits, 95),
        max_wait_s=max(waits, default=0.0),
        avg_bounded_slowdown=sum(slow) / len(slow) if slow else 0.0,
        fairness_jain=jain_index([sum(v) / len(v) for v in per_user.values()]),
        rejected=rejected,
        unfinished=len(trace) - len(done),
        preemptions=preemptions,
        migrations=migrations,
        moved_cost_s=moved_cost_s,
    )
