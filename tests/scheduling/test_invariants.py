"""Property tests of the policy's invariants over random snapshots and random multi-cycle runs."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling import Allocation, PolicyConfig, PolicyQuota, plan
from sam_server.scheduling.model import PolicyJob
from sam_server.scheduling.shapes import MAX_WASTE, flexible_shapes

from .factories import job, overlaps, snapshot

CLASSES = ["low", "normal", "high", "urgent"]


@st.composite
def scenario(draw: st.DrawFn):
    n_wafers = draw(st.integers(1, 3))
    wafers = [
        (f"w{i}", draw(st.integers(3, 12)), draw(st.integers(3, 12))) for i in range(n_wafers)
    ]
    tenants = ["a", "b", "c"]
    quotas = {
        t: PolicyQuota(
            max_pes=draw(st.one_of(st.none(), st.integers(4, 150))),
            max_running_jobs=draw(st.one_of(st.none(), st.integers(1, 5))),
        )
        for t in tenants
    }
    jobs = [
        job(
            i,
            draw(st.integers(1, 8)),
            draw(st.integers(1, 8)),
            tenant=draw(st.sampled_from(tenants)),
            cls=draw(st.sampled_from(CLASSES)),
            submitted=float(draw(st.integers(0, 150))),
            limit=float(draw(st.integers(20, 400))),
        )
        for i in range(draw(st.integers(1, 16)))
    ]
    # some jobs are flexible: they accept every shape of their PEs (within the default bounds)
    jobs = [
        replace(j, shapes=flexible_shapes(j.pes, 12, 12) + ((j.cols, j.rows),))
        if draw(st.booleans())
        else j
        for j in jobs
    ]
    offline = {w[0] for w in wafers if draw(st.booleans()) and draw(st.booleans())}
    return wafers, jobs, quotas, offline


def _run_cycles(wafers, jobs, quotas, offline, cycles, config, check):
    """Apply plans cycle after cycle (jobs end at their limit); `check(plan, state)` each time."""
    pending = {j.id: j for j in jobs}
    running: dict[int, tuple[PolicyJob, Allocation, str]] = {}
    now = 0.0
    for _ in range(cycles):
        for jid, (j, _a, _w) in list(running.items()):
            if j.started_at + j.time_limit_s <= now:
                del running[jid]
        allocs: dict[str, list[Allocation]] = {}
        for _j, a, w in running.values():
            allocs.setdefault(w, []).append(a)
        arrived = [j for j in pending.values() if j.submitted_at <= now]
        snap_jobs = [j for j, _, _ in running.values()] + arrived
        snap = snapshot(wafers, snap_jobs, allocs, quotas, config=config, offline=offline)
        p = plan(snap, now)
        check(p, snap, now)
        for pre in p.preemptions:
            if pre.to is not None:  # a migration: restarts at once at its target
                j, _, _ = running[pre.job_id]
                w, row, col, rows, cols = pre.to
                moved = replace(
                    j,
                    rows=rows,
                    cols=cols,
                    preempt_count=j.preempt_count + 1,
                    last_preempted_at=now,
                )
                running[j.id] = (moved, Allocation(j.id, j.tenant, row, col, rows, cols), w)
                continue
            j, _, _ = running.pop(pre.job_id)
            pending[j.id] = replace(
                j,
                state="pending",
                started_at=None,
                preempt_count=j.preempt_count + 1,
                last_preempted_at=now,
            )
        for s in p.starts:
            j = pending.pop(s.job_id)
            running[j.id] = (
                replace(j, state="running", started_at=now, rows=s.rows, cols=s.cols),
                Allocation(j.id, j.tenant, s.row, s.col, s.rows, s.cols),
                s.wafer_id,
            )
        now += 30.0


def _a_cut_shape(j, rows: int, cols: int) -> bool:
    """Whether rows x cols keeps the bounds of a shape cut to the free space for job `j`."""
    if j.cut_bounds is None:
        return False
    pes, aspect = j.cut_bounds
    return pes <= rows * cols <= pes * (1 + MAX_WASTE) and max(rows, cols) <= aspect * min(
        rows, cols
    )


def _check_regions_and_quotas(p, snap, now) -> None:
    shapes = {w.id: w for w in snap.wafers}
    held = {w.id: [(a.row, a.col, a.rows, a.cols) for a in w.allocations] for w in snap.wafers}
    pes = {}
    count = {}
    for j in snap.jobs:
        if j.state == "running":
            pes[j.tenant] = pes.get(j.tenant, 0) + j.pes
            count[j.tenant] = count.get(j.tenant, 0) + 1
    by_id = {j.id: j for j in snap.jobs}
    for pre in p.preemptions:
        if pre.to is None:
            continue
        mover = next(a for w in snap.wafers for a in w.allocations if a.job_id == pre.job_id)
        old_wafer = next(w.id for w in snap.wafers if mover in w.allocations)
        held[old_wafer].remove((mover.row, mover.col, mover.rows, mover.cols))
        w_id, *target = pre.to
        w = shapes[w_id]
        assert target[0] + target[2] <= w.rows and target[1] + target[3] <= w.cols
        assert not any(overlaps(tuple(target), other) for other in held[w_id])
        held[w_id].append(tuple(target))
    for s in p.starts:
        w = shapes[s.wafer_id]
        assert w.online
        assert 0 <= s.row and s.row + s.rows <= w.rows and 0 <= s.col and s.col + s.cols <= w.cols
        rect = (s.row, s.col, s.rows, s.cols)
        assert not any(overlaps(rect, other) for other in held[s.wafer_id])
        held[s.wafer_id].append(rect)
        j = by_id[s.job_id]
        # the asked shape, an alternative, or (flexible jobs) a shape cut to the free space
        assert (s.rows, s.cols) in j.candidate_shapes() or _a_cut_shape(j, s.rows, s.cols)
        pes[j.tenant] = pes.get(j.tenant, 0) + s.rows * s.cols
        count[j.tenant] = count.get(j.tenant, 0) + 1
    for tenant, state in snap.tenants.items():
        q = state.quota
        assert q.max_pes is None or pes.get(tenant, 0) <= q.max_pes
        assert q.max_running_jobs is None or count.get(tenant, 0) <= q.max_running_jobs


@settings(max_examples=25, deadline=None)
@given(scenario())
def test_regions_never_overlap_or_leave_the_wafer_and_quotas_always_hold(case) -> None:
    wafers, jobs, quotas, offline = case
    _run_cycles(wafers, jobs, quotas, offline, 6, PolicyConfig(), _check_regions_and_quotas)


@settings(max_examples=15, deadline=None)
@given(scenario())
def test_a_decision_is_the_same_for_the_same_snapshot(case) -> None:
    wafers, jobs, quotas, offline = case
    snap = snapshot(wafers, jobs, quotas=quotas, offline=offline)
    assert plan(snap, 100.0) == plan(snap, 100.0)


LOOKING_AHEAD = PolicyConfig(lookahead=3, reserve_after_s=0.0)


@settings(max_examples=25, deadline=None)
@given(scenario())
def test_look_ahead_placements_never_overlap_and_keep_quotas_and_shape_bounds(case) -> None:
    wafers, jobs, quotas, offline = case
    _run_cycles(wafers, jobs, quotas, offline, 6, LOOKING_AHEAD, _check_regions_and_quotas)
    snap = snapshot(wafers, jobs, quotas=quotas, offline=offline)
    assert plan(snap, 100.0, LOOKING_AHEAD) == plan(snap, 100.0, LOOKING_AHEAD)


@settings(max_examples=20, deadline=None)
@given(scenario())
def test_preemption_never_cycles_and_respects_the_protections(case) -> None:
    wafers, jobs, _quotas, _offline = case
    cfg = PolicyConfig(min_run_before_preempt_s=45.0, max_preemptions_per_job=2)
    pairs: set[tuple[int, int]] = set()

    def check(p, snap, now) -> None:
        by_id = {j.id: j for j in snap.jobs}
        for pre in p.preemptions:
            victim, winner = by_id[pre.job_id], by_id[pre.for_job_id]
            if pre.to is not None:
                continue  # a migration (tested below): the job restarts elsewhere
            assert CLASS_RANK[victim.priority_class] < CLASS_RANK[winner.priority_class]
            assert now - victim.started_at >= cfg.min_run_before_preempt_s
            assert victim.preempt_count < cfg.max_preemptions_per_job and victim.preemptible
            assert (winner.id, victim.id) not in pairs
            pairs.add((victim.id, winner.id))

    _run_cycles(wafers, jobs, {}, set(), 8, cfg, check)


MIGRATING = PolicyConfig(
    reserve_after_s=0.0,
    migrate_min_gain_s=0.0,
    min_run_before_preempt_s=30.0,
    max_preemptions_per_job=2,
    preemption=False,
)


@settings(max_examples=40, deadline=None)
@given(scenario())
def test_migrations_never_overlap_and_respect_the_per_job_bound(case) -> None:
    """With migration made eager (no wait, no gain needed), moved jobs' targets and every start
    stay inside the wafer and off every other region, and no job moves more often than the
    bound or sooner than `min_run_before_preempt_s` after its last (re)start or move; the same
    snapshot gives the same plan."""
    wafers, jobs, quotas, offline = case
    moves = 0

    def check(p, snap, now) -> None:
        nonlocal moves
        _check_regions_and_quotas(p, snap, now)
        by_id = {j.id: j for j in snap.jobs}
        for pre in p.preemptions:
            assert pre.to is not None  # preemption is off: every stop is a move
            mover = by_id[pre.job_id]
            assert mover.state == "running" and mover.preemptible
            assert mover.preempt_count < MIGRATING.max_preemptions_per_job
            since = max(mover.started_at, mover.last_preempted_at or 0.0)
            assert now - since >= MIGRATING.min_run_before_preempt_s
            assert by_id[pre.for_job_id].state == "pending"
            moves += 1
        assert plan(snap, now) == p  # deterministic with moves too

    _run_cycles(wafers, jobs, quotas, offline, 10, MIGRATING, check)
