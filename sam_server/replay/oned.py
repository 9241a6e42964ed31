"""A one-dimensional EASY backfill over the same trace: the geometry-free baseline of `sam sim`.

The cluster is one pool of PEs (every wafer's PEs added up, no rectangles, no fragmentation),
so it bounds what any two-dimensional policy can reach on the same jobs. Written apart from the
policy on purpose (nothing shared but the metrics): a bug in `plan` cannot flatter the policy by
also flattering its baseline. Classic EASY (Lifka 1995, Mu'alem & Feitelson 2001): first come
first served; the first waiting job gets a reservation at the shadow time (when enough running
jobs will have ended, by their time limits); a later job may start now if it fits the free PEs
and either ends before the shadow time or uses only PEs the reserved job will not need.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from sam_server.replay.metrics import SimResult, summarize
from sam_server.replay.sim import ClusterSpec
from sam_server.replay.swf import TraceJob, shape_for_pes


@dataclass
class _Pool:
    """The PE pool: free PEs, running jobs' (expected end, PEs), and the results so far."""

    free: int
    limits: dict[int, tuple[float, int]] = field(default_factory=dict)
    ends: list[tuple[float, int]] = field(default_factory=list)
    first_start: dict[int, float] = field(default_factory=dict)
    finish: dict[int, float] = field(default_factory=dict)

    def start(self, job: TraceJob, pes: int, now: float) -> None:
        """Run `job` on `pes` PEs from `now` for its real run time."""
        self.free -= pes
        self.limits[job.id] = (now + job.time_limit_s, pes)
        self.first_start[job.id] = now
        heapq.heappush(self.ends, (now + job.run_s, job.id))

    def shadow(self, need: int, now: float) -> tuple[float, int]:
        """(When `need` PEs will be free by the time limits, PEs spare at that time)."""
        avail = self.free
        for end, pes in sorted(self.limits.values()):
            avail += pes
            if avail >= need:
                return max(now, end), avail - need
        return float("inf"), 0  # cannot happen: every accepted job fits the pool


def _schedule(pool: _Pool, queue: deque[tuple[TraceJob, int]], now: float) -> None:
    """Start the queue's head while it fits, then backfill behind the head's reservation."""
    while queue and queue[0][1] <= pool.free:
        job, pes = queue.popleft()
        pool.start(job, pes, now)
    if not queue:
        return
    shadow, extra = pool.shadow(queue[0][1], now)
    for item in list(queue)[1:]:
        job, pes = item
        if pes > pool.free:
            continue
        ends_in_time = now + job.time_limit_s <= shadow
        if ends_in_time or pes <= extra:
            queue.remove(item)
            pool.start(job, pes, now)
            if not ends_in_time:
                extra -= pes


def simulate_oned(
    trace: Sequence[TraceJob], wafers: int, rows: int, cols: int, pes_per_proc: int
) -> SimResult:
    """Replay `trace` under 1-D EASY on wafers x rows x cols PEs pooled as one.

    The same jobs as `sim.simulate`: a job whose PE count cannot fit one wafer as a rectangle
    is rejected. Utilization counts exactly the PEs each job asks for.
    """
    accepted: list[tuple[TraceJob, int]] = []
    for t in trace:
        pes = t.procs * pes_per_proc
        if shape_for_pes(pes, rows, cols) is not None:
            accepted.append((t, pes))
    accepted.sort(key=lambda a: (a[0].submit_s, a[0].id))
    pool = _Pool(wafers * rows * cols)
    queue: deque[tuple[TraceJob, int]] = deque()
    i = 0
    while i < len(accepted) or pool.ends:
        next_arrival = accepted[i][0].submit_s if i < len(accepted) else float("inf")
        now = min(next_arrival, pool.ends[0][0] if pool.ends else float("inf"))
        while pool.ends and pool.ends[0][0] <= now:
            end, job_id = heapq.heappop(pool.ends)
            pool.free += pool.limits.pop(job_id)[1]
            pool.finish[job_id] = end
        while i < len(accepted) and accepted[i][0].submit_s <= now:
            queue.append(accepted[i])
            i += 1
        _schedule(pool, queue, now)
    by_id = {t.id: t for t, _ in accepted}
    shapes = {t.id: (1, pes) for t, pes in accepted}
    spec = ClusterSpec(wafers, rows, cols, pes_per_proc)
    rejected = len(trace) - len(accepted)
    return summarize(by_id, shapes, pool.first_start, pool.finish, spec, rejected, 0, "oned-easy")
