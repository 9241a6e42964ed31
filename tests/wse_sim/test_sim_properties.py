"""Physical invariants of the block engine (hypothesis): conservation, isolation, determinism,
translation invariance and monotone timing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws
from wse_sim.kernels import game_of_life, stencil7

SETTINGS = settings(max_examples=20, deadline=None)
RAMPS = pytest.mark.parametrize(
    "ramp", [pytest.param(1, id="default-ramp"), pytest.param(0, id="ramp0")]
)


def wafer(rows=24, cols=24, ramp=1):
    return ws.Wafer(ws.get_arch("wse2", rows=rows, cols=cols, ramp_latency=ramp))


@st.composite
def job_programs(draw):
    """A random sequence of ops on a h x w region, including transfers that leave it."""
    h, w = draw(st.integers(2, 6)), draw(st.integers(2, 6))
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["transfer", "bcast", "reduce", "compute", "allreduce"]))
        k = draw(st.integers(1, 12))
        if kind == "transfer":
            ops.append((kind, draw(st.integers(-h, h)), draw(st.integers(-w, w)), k))
        else:
            ops.append((kind, k))
    return h, w, ops


def run_program(region, ops):
    h, w = region.rows, region.cols
    for op in ops:
        if op[0] == "transfer":
            _, dr, dc, k = op
            ws.transfer(region, (0, 0, h, w), (dr, dc, h, w), k)
        elif op[0] == "bcast":
            ws.broadcast_row(region, None, op[1], root=w // 2)
        elif op[0] == "reduce":
            ws.reduce_col(region, None, op[1], root=h - 1)
        elif op[0] == "compute":
            ws.compute(region, (0, 0, 1, w), 10 * op[1])
        else:
            ws.allreduce(region, None, op[1])
    return region.counters(), region.cycles


@RAMPS
@SETTINGS
@given(job_programs())
def test_wavelets_are_conserved(ramp, program):
    h, w, ops = program
    region = wafer(ramp=ramp).allocate("job", 5, 5, h, w)
    run_program(region, ops)
    assert region.wavelets_sent == region.wavelets_delivered + region.wavelets_dropped
    assert int(region.words_received.sum()) == region.wavelets_delivered  # every delivery lands


@RAMPS
@SETTINGS
@given(job_programs())
def test_nothing_crosses_a_region_border(ramp, program):
    h, w, ops = program
    wf = wafer(ramp=ramp)
    neighbours = {
        name: wf.allocate(name, r, c, rr, cc)
        for name, (r, c, rr, cc) in {
            "north": (0, 0, 5, 24),
            "south": (5 + h, 0, 24 - 5 - h, 24),
            "west": (5, 0, h, 5),
            "east": (5, 5 + w, h, 24 - 5 - w),
        }.items()
    }
    region = wf.allocate("job", 5, 5, h, w)
    run_program(region, ops)
    for other in neighbours.values():
        assert other.cycles == 0 and int(other.words_received.sum()) == 0
        assert int(other.link_busy.max()) == 0 and other.wavelets_sent == 0
    leaving = [op for op in ops if op[0] == "transfer" and (abs(op[1]) > 0 or abs(op[2]) > 0)]
    if any(abs(dr) >= 1 or abs(dc) >= 1 for _, dr, dc, _ in leaving):
        assert region.wavelets_dropped > 0 and region.faults > 0


@RAMPS
@SETTINGS
@given(job_programs())
def test_results_and_cycles_are_deterministic(ramp, program):
    h, w, ops = program
    first = run_program(wafer(ramp=ramp).allocate("job", 3, 4, h, w), ops)
    second = run_program(wafer(ramp=ramp).allocate("job", 3, 4, h, w), ops)
    assert first[1] == second[1]
    for name in first[0]:
        np.testing.assert_array_equal(first[0][name], second[0][name])


@RAMPS
@SETTINGS
@given(job_programs(), st.integers(0, 14), st.integers(0, 14))
def test_a_job_sees_the_same_cycles_wherever_its_region_sits(ramp, program, row, col):
    h, w, ops = program
    here = run_program(wafer(ramp=ramp).allocate("job", 0, 0, h, w), ops)
    there = run_program(wafer(ramp=ramp).allocate("job", row, col, h, w), ops)
    assert here[1] == there[1]
    for name in here[0]:
        np.testing.assert_array_equal(here[0][name], there[0][name])


@RAMPS
@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10), st.integers(0, 10), st.integers(0, 2**31 - 1))
def test_kernel_results_do_not_depend_on_placement(ramp, row, col, seed):
    rng = np.random.default_rng(seed)
    board = (rng.random((6, 6)) < 0.4).astype(np.int8)
    u = rng.standard_normal((6, 6, 4)).astype(np.float32)
    a = game_of_life(wafer(ramp=ramp).allocate("job", 0, 0, 6, 6), board, 2)
    b = game_of_life(wafer(ramp=ramp).allocate("job", row, col, 6, 6), board, 2)
    assert a.cycles == b.cycles and (a.value == b.value).all()
    s1 = stencil7(wafer(ramp=ramp).allocate("job", 0, 0, 6, 6), u)
    s2 = stencil7(wafer(ramp=ramp).allocate("job", row, col, 6, 6), u)
    assert s1.cycles == s2.cycles and np.array_equal(s1.value, s2.value)


@RAMPS
@SETTINGS
@given(st.integers(1, 10), st.integers(1, 10), st.integers(1, 40), st.integers(1, 40))
def test_time_grows_with_distance_and_message_size(ramp, d1, d2, k1, k2):
    def cycles(d, k):
        return ws.transfer(
            wafer(1, 24, ramp).allocate("job", 0, 0, 1, 24), (0, 0, 1, 1), (0, d, 1, 1), k
        )

    lo_d, hi_d = sorted((d1, d2))
    lo_k, hi_k = sorted((k1, k2))
    assert cycles(lo_d, k1) <= cycles(hi_d, k1)
    assert cycles(d1, lo_k) <= cycles(d1, hi_k)
    if hi_d > lo_d:
        assert cycles(lo_d, k1) < cycles(hi_d, k1)
    if hi_k > lo_k:
        assert cycles(d1, lo_k) < cycles(d1, hi_k)
