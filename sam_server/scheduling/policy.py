"""`plan(snapshot, now) -> Plan`: one scheduling cycle as a pure function.

1. Order the waiting jobs (the profile's `QueueSort`: by priority, or for the anchors by submit
   time).
2. Send the first queued jobs of the compile queue (fair between tenants) to the free compile
   slots.
3. Walk the pending jobs (queue order, with the profile's `WalkOrder` plugins' jobs first). A
   job the `Filter`s admit starts where the `Score` plugin places it; the first that does not
   fit may make room now through a `PostFilter` (preempt, suspend, migrate, drain), else the
   `Reserve` plugin may give it a rectangle and start time, around which the jobs behind it
   backfill (docs/architecture.md, "The scheduling framework").
4. Explain every job left waiting: all reasons, its position and an ETA.

No database, broker or clock: the same function drives the live loop and `sam sim`, and the same
snapshot and profile always give the same plan.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import attrgetter, eq

from sam_server.scheduling.explain import ClusterView, estimate_starts, job_reasons
from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import PriorityOf
from sam_server.scheduling.framework.profile import Profile
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.model import (
    JobExplain,
    JobId,
    Plan,
    PolicyConfig,
    PolicyJob,
    Snapshot,
    WaferMetrics,
)
from sam_server.scheduling.profiles import profile_for
from sam_server.scheduling.quota import QuotaLedger
from sam_server.states import WAITING

WAITING_STATES = WAITING

_ID, _STATE, _TENANT = attrgetter("id"), attrgetter("state"), attrgetter("tenant")
_IS_WAITING = frozenset(WAITING_STATES).__contains__


def _in_state(jobs: list[PolicyJob], state: str) -> list[PolicyJob]:
    """The jobs in `state`, in order (C-speed passes: this runs over 100,000 jobs)."""
    return list(compress(jobs, map(eq, repeat(state), map(_STATE, jobs))))


def plan(
    snapshot: Snapshot,
    now: float,
    config: PolicyConfig | None = None,
    explain: bool = True,
    explain_only: Callable[[Sequence[PolicyJob]], list[int]] | None = None,
    profile: Profile | None = None,
) -> Plan:
    """One scheduling cycle: compiles, starts, preemptions, and the explanation of every wait.

    `profile` is the plugins the cycle runs; without one, the profile `config` (else
    `snapshot.config`) stands for (`profiles.profile_for`). `now` is the caller's time in float
    seconds. `explain=False` (trace replay only) skips `waiting` and `order`, which are then
    empty; the decisions are the same. `explain_only(jobs)`: the indexes, ascending, of the jobs
    to explain among those left waiting in queue order (the live loop stores a few thousand
    explanations a cycle, not 100,000); `order` is whole.
    """
    if profile is None:
        profile = profile_for(config or snapshot.config)
    state = CycleState.of(snapshot, now, profile)
    waiting = list(compress(snapshot.jobs, map(_IS_WAITING, map(_STATE, snapshot.jobs))))
    sort = profile.queue_sort
    prio_of = sort.priorities(snapshot, now, explain)
    ordered = sort.order(waiting, prio_of)
    queue = compile_queue(ordered, snapshot.jobs, state.ledger)
    compiles = _compiles(queue, snapshot)
    pending = _in_state(ordered, "pending")
    walk = pending
    for plugin in profile.walk_orders:
        walk = _put_first(plugin.first(state, pending), walk)
    _walk(state, walk)
    started = state.started()
    left = [j for j in ordered if j.id not in started] if started else ordered
    left = left if explain else []
    return Plan(
        compiles=compiles,
        starts=state.starts,
        preemptions=state.preemptions,
        waiting=_explain_all(state, left, prio_of, set(compiles), queue, explain_only)
        if explain
        else {},
        reservation=state.reservation,
        wafer_metrics=_metrics(state),
        order=list(map(_ID, left)),
        reservations=list(state.reservations),
    )


def _walk(state: CycleState, pending: list[PolicyJob]) -> None:
    """Step 3: each pending job in walk order through the profile's extension points."""
    profile = state.profile
    filters, score, post_filters = profile.filters, profile.score, profile.post_filters
    reserve = profile.reserve
    backfill, limit = reserve.backfill(), reserve.limit()
    blocked_seen = False
    state.pending = pending
    for job in pending:
        if not all(f.admits(state, job) for f in filters):
            continue  # (a job a filter skips does not hold back the jobs behind it)
        if blocked_seen and not backfill:
            break  # strict order: nothing overtakes the blocked head of the queue
        if score.start(state, job):
            continue
        blocked_seen = True
        if len(state.reservations) >= limit or state.preempting:
            continue
        if any(p.unblock(state, job) for p in post_filters):
            continue
        reserve.reserve(state, job)


def _put_first(first: list[PolicyJob], pending: list[PolicyJob]) -> list[PolicyJob]:
    """`pending` with the jobs of `first` moved to the front, in that order, once each."""
    if not first:
        return pending
    chosen: dict[int, PolicyJob] = {}
    for job in first:
        chosen.setdefault(id(job), job)
    return [*chosen.values(), *(j for j in pending if id(j) not in chosen)]


def compile_queue(
    ordered: list[PolicyJob], jobs: tuple[PolicyJob, ...], ledger: QuotaLedger
) -> list[PolicyJob]:
    """The queued jobs in the order they get compile slots: fair between tenants.

    Each next place goes to the tenant with the fewest compiles in flight or already placed
    ahead (ties: the tenant whose next job comes first in `ordered`), so one tenant's many or
    slow models cannot queue ahead of every other tenant's compile. Within a tenant, `ordered`.
    """
    over = ledger.over_queued
    queued = _in_state(ordered, "queued")
    if over:
        queued = [j for j in queued if j.id not in over]
    if len(set(map(_TENANT, queued))) <= 1:  # one tenant: its own order (the heap gives it)
        return queued
    per_tenant: dict[str, list[PolicyJob]] = {}
    for job in queued:
        per_tenant.setdefault(job.tenant, []).append(job)
    load: dict[str, int] = {}
    for job in jobs:
        if job.state == "compiling":
            load[job.tenant] = load.get(job.tenant, 0) + 1
    rank = {id(j): k for k, j in enumerate(ordered)}
    heap = [(load.get(t, 0), rank[id(q[0])], t) for t, q in per_tenant.items()]
    heapq.heapify(heap)
    taken = dict.fromkeys(per_tenant, 0)
    out: list[PolicyJob] = []
    while heap:
        n, _, tenant = heapq.heappop(heap)
        queue = per_tenant[tenant]
        out.append(queue[taken[tenant]])
        taken[tenant] += 1
        if taken[tenant] < len(queue):
            heapq.heappush(heap, (n + 1, rank[id(queue[taken[tenant]])], tenant))
    return out


def _compiles(queue: list[PolicyJob], snapshot: Snapshot) -> list[JobId]:
    """The first jobs of the compile queue for the free slots, each tenant within its cap."""
    cap = snapshot.compile_slots_per_tenant
    held: dict[str, int] = {}
    if snapshot.compile_slots_free <= 0 or not queue:
        return []  # (the walk below would choose none)
    if cap:
        for tenant in [j.tenant for j in snapshot.jobs if j.state == "compiling"]:
            held[tenant] = held.get(tenant, 0) + 1
    # tenants below their cap: once none is left, no later job can be chosen
    room = {t for t in set(map(_TENANT, queue)) if not cap or held.get(t, 0) < cap}
    chosen: list[JobId] = []
    for job in queue:
        if len(chosen) >= snapshot.compile_slots_free or not room:
            break
        if cap and held.get(job.tenant, 0) >= cap:
            continue
        held[job.tenant] = held.get(job.tenant, 0) + 1
        chosen.append(job.id)
        if cap and held[job.tenant] >= cap:
            room.discard(job.tenant)
    return chosen


def _explain_all(
    state: CycleState,
    left: list[PolicyJob],
    prio_of: PriorityOf | None,
    dispatched: set[JobId],
    compile_order: list[PolicyJob],
    only: Callable[[Sequence[PolicyJob]], list[int]] | None = None,
) -> dict[JobId, JobExplain]:
    """JobExplain for every job left waiting, in queue order; a queued job's compiles ahead
    are counted in the compile queue (fair between tenants), not in the priority order.

    Work is proportional to the jobs explained, plus C-speed passes over the rest: with
    `only`, the jobs at the indexes it gives; the counts of jobs ahead come from `list.count`
    over the states between two explained jobs."""
    undispatched = list(map(_ID, compile_order))
    if dispatched:
        undispatched = [i for i in undispatched if i not in dispatched]
    ahead = dict(zip(undispatched, range(len(undispatched)), strict=True))
    wafers = state.snapshot.wafers
    view = ClusterView(
        spaces=state.spaces,
        fit_now=state.index_now(),
        fit_long=state.index_long(),
        reservation=state.reservation,
        shapes=[(w.rows, w.cols) for w in wafers if w.online],
        dispatched=dispatched,
        preempting=state.preempting,
        flexible=state.args.flexible,
    )
    held = [
        (t.end, t.rect[2] * t.rect[3])
        for i, ends in enumerate(state.ends)
        for t in ends
        if wafers[i].online
    ]
    picked = list(range(len(left))) if only is None else only(left)
    etas = estimate_starts(
        left,
        held,
        sum(r * c for r, c in view.shapes),
        max((r * c for r, c in view.shapes), default=0),
        state.now,
        state.reservation,
        # no job behind the last one explained needs one
        min(state.args.eta_depth, picked[-1] + 1 if picked else 0),
    )
    # each job's state, "" for a queued job sent to compile (it counts in neither total)
    states = list(map(_STATE, left))
    if dispatched:
        states = [
            s if i not in dispatched else "" for s, i in zip(states, map(_ID, left), strict=True)
        ]
    assert prio_of is not None  # (plan computes priorities whenever it explains)
    out: dict[JobId, JobExplain] = {}
    pending_ahead = queued_ahead = counted = 0
    for k in picked:
        if k == counted + 1:  # (every job explained: no slice per job)
            pending_ahead += states[counted] == "pending"
            queued_ahead += states[counted] == "queued"
        elif k > counted:
            between = states[counted:k]
            pending_ahead += between.count("pending")
            queued_ahead += between.count("queued")
        counted = k
        job = left[k]
        compiles_ahead = ahead.get(job.id, queued_ahead)
        why = job_reasons(job, view, state.ledger, pending_ahead, compiles_ahead, state.now)
        out[job.id] = JobExplain(k + 1, prio_of(job), why, etas.get(job.id))
    return out


def _metrics(state: CycleState) -> dict[str, WaferMetrics]:
    """Free PEs, largest free rectangle and fragmentation of each wafer after the starts."""
    out = {}
    for i, wafer in enumerate(state.snapshot.wafers):
        space = state.spaces[i]
        if space is None:
            rects = [(a.row, a.col, a.rows, a.cols) for a in wafer.allocations]
            space = FreeSpace.of(wafer.rows, wafer.cols, rects)
        out[wafer.id] = WaferMetrics(
            wafer.id, space.free_pes, space.largest_free_rect(), space.fragmentation()
        )
    return out
