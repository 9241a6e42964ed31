"""Flexible regions: the shapes a job may take, and the policy starting one in a shape that fits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceJob, shape_for_pes
from sam_server.scheduling import PolicyConfig, PolicyQuota, easy_config, plan
from sam_server.scheduling.shapes import flexible_shapes, free_space_shapes

from .factories import job, running, snapshot

W10 = [("w0", 10, 10)]


def test_flexible_shapes_cover_the_pes_within_the_aspect_and_waste_bounds() -> None:
    shapes = flexible_shapes(64, 16, 16)
    assert shapes[0] == (8, 8)  # least area first, then the squarest
    assert (4, 16) in shapes and (16, 4) in shapes  # both orientations
    for r, c in shapes:
        assert 64 <= r * c <= 72 and max(r, c) / min(r, c) <= 4 and r <= 16 and c <= 16
    # no shape is at least as large in both sides as another (it would never fit where that fails)
    assert not any(a != b and a[0] >= b[0] and a[1] >= b[1] for a in shapes for b in shapes)
    assert flexible_shapes(64, 4, 4) == ()  # larger than the wafer: nothing
    with pytest.raises(ValueError, match="at least 1 PE"):
        flexible_shapes(0, 16, 16)


def _blocked_wide_job(**kw: object):
    """A 10x10 wafer with its left 6 columns held: only a 10-row x 4-col strip is free."""
    held, alloc = running(9, 0, 0, 10, 6, limit=100.0)
    wide = job(1, 4, 10, limit=50.0, **kw)  # type: ignore[arg-type]
    return held, alloc, wide


def test_a_flexible_job_starts_in_a_shape_it_did_not_ask_for() -> None:
    held, alloc, wide = _blocked_wide_job()
    flexible = replace(wide, shapes=((10, 4),))
    p = plan(snapshot(W10, [held, flexible], {"w0": [alloc]}), 10.0)
    assert [(s.job_id, s.rows, s.cols, s.row, s.col) for s in p.starts] == [(1, 10, 4, 0, 6)]
    # the anchors (and a rigid job) keep the asked shape and wait
    rigid = plan(snapshot(W10, [held, wide], {"w0": [alloc]}), 10.0)
    assert rigid.starts == [] and 1 in rigid.waiting
    cfg = easy_config()
    anchor = plan(snapshot(W10, [held, flexible], {"w0": [alloc]}, config=cfg), 10.0)
    assert anchor.starts == []


def test_the_best_fit_shape_wins_and_the_asked_one_on_a_tie() -> None:
    tie = job(1, 2, 5, shapes=((5, 2),))  # both leave an 8x10 / 10x8 free rectangle
    p = plan(snapshot(W10, [tie]), 0.0)
    assert [(s.rows, s.cols) for s in p.starts] == [(2, 5)]
    better = job(1, 2, 5, shapes=((5, 2), (1, 10)))  # a 1x10 strip leaves 9x10 free
    p = plan(snapshot(W10, [better]), 0.0)
    assert [(s.rows, s.cols) for s in p.starts] == [(1, 10)]


def test_a_larger_flexible_shape_never_takes_the_tenant_over_max_pes() -> None:
    held, alloc = running(9, 0, 0, 10, 6, limit=100.0, tenant="other")
    # asks 8x5 = 40 PEs (does not fit the 10x4 strip); its alternative 10x4 = 40 fits, 7x6 not
    j = job(1, 8, 5, shapes=((10, 5), (10, 4)))
    quotas = {"t": PolicyQuota(max_pes=40), "other": PolicyQuota()}
    p = plan(snapshot(W10, [held, j], {"w0": [alloc]}, quotas=quotas), 0.0)
    assert [(s.rows, s.cols) for s in p.starts] == [(10, 4)]
    tight = {"t": PolicyQuota(max_pes=39), "other": PolicyQuota()}
    small = job(2, 6, 6, shapes=((4, 10),))  # 36 PEs; 4x10 = 40
    snap = snapshot(W10, [held, small], {"w0": [alloc]}, quotas=tight)
    p = plan(snap, 0.0, PolicyConfig(cut_to_fit=False))
    assert p.starts == []  # 6x6 does not fit the strip and 4x10 would exceed max_pes
    # cut to the 10x4 strip, 9x4 holds exactly its 36 PEs: within max_pes
    assert [(s.rows, s.cols) for s in plan(snap, 0.0).starts] == [(9, 4)]


def test_a_flexible_job_reserves_the_shape_that_starts_first() -> None:
    # left half held until 100, right 4 columns until 1000: a 10x6 job waits for 100, a 6x10 for
    # 1000; the flexible job reserves 10x6 at 100 and explains the shape it will get
    left, a1 = running(8, 0, 0, 10, 6, limit=100.0)
    right, a2 = running(9, 0, 6, 10, 4, limit=1000.0)
    j = job(1, 6, 10, limit=50.0, shapes=((10, 6),))
    cfg = PolicyConfig(reserve_after_s=0.0)
    p = plan(snapshot(W10, [left, right, j], {"w0": [a1, a2]}, config=cfg), 0.0)
    assert p.reservation is not None
    assert (p.reservation.rows, p.reservation.cols, p.reservation.start_time) == (10, 6, 100.0)


def test_explain_tells_a_flexible_job_that_none_of_its_shapes_fits() -> None:
    held, alloc = running(9, 0, 0, 10, 7, limit=100.0)  # a 10x3 strip is free
    j = job(1, 4, 10, shapes=((10, 4), (5, 8)))
    p = plan(snapshot(W10, [held, j], {"w0": [alloc]}), 0.0)
    reasons = p.waiting[1].reasons
    assert any("none of its 2 other accepted shapes fits" in r.message for r in reasons)


def test_sam_sim_starts_a_trace_job_rotated_where_easy_waits() -> None:
    # a 3x6 wafer: job 1 (12 PEs) takes 3x4, leaving a 3x2 strip; job 2 (6 PEs) is compiled
    # as 2x3, which does not fit the strip, but its rotation does
    trace = [TraceJob(1, 0.0, 100.0, 100.0, 12, "u"), TraceJob(2, 1.0, 50.0, 50.0, 6, "u")]
    spec = ClusterSpec(1, 3, 6, 1)
    assert shape_for_pes(6, 3, 6) == (2, 3)
    sam = simulate(trace, spec, PolicyConfig(reserve_after_s=0.0), "sam")
    easy = simulate(trace, spec, easy_config(), "easy")
    assert sam.max_wait_s == 0.0 and easy.max_wait_s == 99.0
    assert sam.utilization > easy.utilization  # same work, shorter makespan


def test_a_flexible_region_in_a_job_spec_becomes_the_policy_jobs_shapes() -> None:
    from sam_server.controller.snapshot import accepted_shapes
    from sam_server.schemas.job_spec import RegionRequest

    spec = {"resources": {"region": {"rows": 24, "cols": 40, "flexible": True}}}
    shapes = accepted_shapes(spec, 24, 40)
    assert shapes[0] == (40, 24) and (24, 40) not in shapes
    assert all(r * c >= 960 and max(r, c) / min(r, c) <= 4 for r, c in shapes)
    assert accepted_shapes({"resources": {"region": {"rows": 24, "cols": 40}}}, 24, 40) == ()
    square = {"resources": {"region": {"rows": 8, "cols": 8, "flexible": True, "max_aspect": 1}}}
    assert accepted_shapes(square, 8, 8) == ()  # only square shapes: 8x8 itself
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RegionRequest(rows=8, cols=8, flexible=True, max_aspect=0.5)


def test_a_moldable_job_takes_a_shape_a_little_smaller_only_when_no_full_shape_fits() -> None:
    """Shrunk shapes that span a wafer side come first (they tile it); the job starts in one
    only when none of its full shapes fits, and its time limit stretches by the PEs it lacks."""
    from sam_server.scheduling import plan
    from sam_server.scheduling.shapes import shrunk_shapes

    from .factories import job, running, snapshot

    assert shrunk_shapes(192, 23, 34, 0.05)[0] == (23, 8)  # 4 fit across 34 columns
    assert all(182 <= r * c < 192 for r, c in shrunk_shapes(192, 23, 34, 0.05))
    assert shrunk_shapes(192, 23, 34, 0.0) == ()
    filler, alloc = running(1, 0, 0, 1, 20, limit=5000.0)
    shapes = (*flexible_shapes(104, 6, 20), *shrunk_shapes(104, 6, 20, 0.05))
    moldable = replace(job(2, 8, 13, limit=1000.0), shapes=shapes, work_pes=104)
    p = plan(snapshot([("w0", 6, 20)], [filler, moldable], {"w0": [alloc]}), 0.0)
    assert [(s.job_id, s.rows, s.cols) for s in p.starts] == [(2, 5, 20)]
    assert moldable.limit_in(5, 20) == 1000.0 * 104 / 100
    roomy = snapshot([("w0", 9, 20)], [filler, moldable], {"w0": [alloc]})
    assert all(s.rows * s.cols >= 104 for s in plan(roomy, 0.0).starts)
    assert len(plan(roomy, 0.0).starts) == 1


def test_free_space_shapes_are_flush_with_a_free_rectangle_and_keep_the_bounds() -> None:
    # free rectangles 11x34 and 23x2 (two 12x16 jobs side by side on a 23x34 wafer)
    front = [(11, 34), (23, 2)]
    assert free_space_shapes(192, front) == ((11, 18),)  # flush with the 11 rows
    assert free_space_shapes(400, front) == ()  # larger than any free rectangle
    # 40 PEs: 11x4 (flush with 11x34), 20x2 (flush with 23x2) is 10:1, beyond the bound
    assert free_space_shapes(40, front) == ((11, 4),)
    assert free_space_shapes(40, front, max_aspect=10.0) == ((20, 2), (11, 4))  # least area
    # 46 PEs: 23x2 is 11.5:1, beyond the aspect bound; 11x5 wastes 9 PEs (19.6%), beyond 12.5%
    assert free_space_shapes(46, front) == ()
    for r, c in free_space_shapes(100, [(9, 30), (30, 9), (12, 12)]):
        assert 100 <= r * c <= 112.5 and max(r, c) <= 4 * min(r, c)


def test_a_flexible_job_starts_in_a_shape_cut_to_the_free_space() -> None:
    # 23x34 wafer, the top 12 rows and the bottom-right 11x16 held: 11x18 stays free. A
    # quarter job (192 PEs) fits none of its usual shapes (12x16, 16x12, 8x24, 13x15, 15x13,
    # 14x14) there, but the shape cut to the hole, 11x18 (198 PEs), does.
    wafer = [("w0", 23, 34)]
    a, alloc_a = running(8, 0, 0, 12, 34, limit=1000.0)
    b, alloc_b = running(9, 12, 18, 11, 16, limit=1000.0)
    quarter = job(1, 12, 16, limit=100.0, shapes=flexible_shapes(192, 23, 34) + ((16, 12),))
    assert not any(r <= 11 and c <= 18 for r, c in quarter.candidate_shapes())
    snap = snapshot(wafer, [a, b, quarter], {"w0": [alloc_a, alloc_b]})
    p = plan(snap, 10.0)
    assert [(s.job_id, s.row, s.col, s.rows, s.cols) for s in p.starts] == [(1, 12, 0, 11, 18)]
    # off (or rigid, or the anchors): it waits
    assert plan(snap, 10.0, PolicyConfig(cut_to_fit=False)).starts == []
    rigid = replace(quarter, shapes=())
    assert plan(snapshot(wafer, [a, b, rigid], {"w0": [alloc_a, alloc_b]}), 10.0).starts == []
    assert plan(snap, 10.0, easy_config()).starts == []


def test_the_replay_runs_a_cycle_when_only_a_cut_shape_fits() -> None:
    # 6 PEs per processor on 23x34: two 32-processor jobs (192 PEs) run for an hour; a third
    # arrives after them and starts at once in a cut shape, not when one of them ends
    spec = ClusterSpec(1, 23, 34, 6)
    trace = [
        TraceJob(1, 0.0, 3600.0, 3600.0, 32, "u"),
        TraceJob(2, 0.0, 3600.0, 3600.0, 32, "u"),
        TraceJob(3, 60.0, 600.0, 600.0, 32, "u"),
    ]
    # (plain best fit: the look-ahead would place the first two so that a usual shape fits)
    on = simulate(trace, spec, PolicyConfig(lookahead=0))
    off = simulate(trace, spec, PolicyConfig(cut_to_fit=False, lookahead=0))
    assert on.max_wait_s < off.max_wait_s
    assert simulate(trace, spec, PolicyConfig(cut_to_fit=False)).max_wait_s == 0.0


def test_a_reservation_takes_a_cut_shape_when_it_starts_earlier() -> None:
    # 23x34: the top 12 rows and the bottom-right 11x16 held until 1000; the 11x18 hole at the
    # bottom left is held until 100. A quarter job (192 PEs) fits no usual shape before 1000,
    # but the hole's shape, 11x18, from 100: it reserves that.
    wafer = [("w0", 23, 34)]
    a, alloc_a = running(7, 0, 0, 12, 34, limit=1000.0)
    b, alloc_b = running(8, 12, 18, 11, 16, limit=1000.0)
    c, alloc_c = running(9, 12, 0, 11, 18, limit=100.0)
    quarter = job(1, 12, 16, limit=50.0, shapes=flexible_shapes(192, 23, 34) + ((16, 12),))
    snap = snapshot(wafer, [a, b, c, quarter], {"w0": [alloc_a, alloc_b, alloc_c]})
    cfg = PolicyConfig(reserve_after_s=0.0)
    res = plan(snap, 10.0, cfg).reservation
    assert res is not None and res.job_id == 1
    assert (res.row, res.col, res.rows, res.cols, res.start_time) == (12, 0, 11, 18, 100.0)
    usual = plan(snap, 10.0, replace(cfg, cut_reserve=False)).reservation
    assert usual is not None and usual.start_time == 1000.0 and (usual.rows, usual.cols) != (11, 18)
