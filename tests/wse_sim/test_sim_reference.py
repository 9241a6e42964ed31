"""The vectorized block engine matches the naive per-PE reference exactly on small regions, for
the default latencies, free RAMPs (ramp_latency=0) and slower RAMPs and hops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws
from wse_sim.reference import NaiveRegion


@st.composite
def rects(draw, rows, cols):
    r = draw(st.integers(0, rows - 1))
    c = draw(st.integers(0, cols - 1))
    h = draw(st.integers(1, rows - r))
    w = draw(st.integers(1, cols - c))
    return (r, c, h, w)


@st.composite
def programs(draw):
    rows, cols = draw(st.integers(2, 8)), draw(st.integers(2, 8))
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(
            st.sampled_from(
                [
                    "compute",
                    "transfer",
                    "bcast_row",
                    "bcast_col",
                    "reduce_row",
                    "reduce_col",
                    "allreduce",
                    "barrier",
                ]
            )
        )
        rect = draw(rects(rows, cols))
        k = draw(st.integers(1, 9))
        if kind == "transfer":
            ops.append(
                (kind, rect, draw(st.integers(-rows, rows)), draw(st.integers(-cols, cols)), k)
            )
        elif kind in ("bcast_row", "reduce_row"):
            ops.append((kind, rect, k, draw(st.integers(0, rect[3] - 1))))
        elif kind in ("bcast_col", "reduce_col"):
            ops.append((kind, rect, k, draw(st.integers(0, rect[2] - 1))))
        else:
            ops.append((kind, rect, k))
    return rows, cols, ops


LATENCIES = [
    pytest.param({}, id="default"),
    pytest.param({"ramp_latency": 0}, id="ramp0"),
    pytest.param({"ramp_latency": 2, "hop_latency": 2}, id="ramp2-hop2"),
]


def run_both(rows, cols, ops, **latencies):
    arch = ws.get_arch("wse2", rows=rows, cols=cols, **latencies)
    region = ws.Wafer(arch).allocate("job", 0, 0, rows, cols)
    naive = NaiveRegion(rows, cols, arch)
    for op in ops:
        kind, rect = op[0], op[1]
        if kind == "compute":
            ws.compute(region, rect, op[2] * 7)
            naive.compute(rect, op[2] * 7)
        elif kind == "transfer":
            _, _, dr, dc, k = op
            ws.transfer(region, rect, (rect[0] + dr, rect[1] + dc, rect[2], rect[3]), k)
            naive.transfer(rect, dr, dc, k)
        elif kind == "bcast_row":
            ws.broadcast_row(region, rect, op[2], op[3])
            naive.broadcast_row(rect, op[2], op[3])
        elif kind == "bcast_col":
            ws.broadcast_col(region, rect, op[2], op[3])
            naive.column_op("broadcast_row", rect, op[2], op[3])
        elif kind == "reduce_row":
            ws.reduce_row(region, rect, op[2], op[3])
            naive.reduce_row_chain(rect, op[2], op[3])
        elif kind == "reduce_col":
            ws.reduce_col(region, rect, op[2], op[3])
            naive.column_op("reduce_row_chain", rect, op[2], op[3])
        elif kind == "allreduce":
            ws.allreduce(region, rect, op[2])
            naive.allreduce(rect, op[2])
        else:
            ws.barrier(region, rect)
            naive.barrier(rect)
    return region, naive


@pytest.mark.parametrize("latencies", LATENCIES)
@settings(max_examples=60, deadline=None)
@given(programs())
def test_block_engine_matches_naive_reference_exactly(latencies, program):
    region, naive = run_both(*program, **latencies)
    ref = naive.state()
    np.testing.assert_array_equal(region.clock, np.array(ref["clock"]))
    np.testing.assert_array_equal(region.busy, np.array(ref["busy"]))
    np.testing.assert_array_equal(region.words_sent, np.array(ref["sent"]))
    np.testing.assert_array_equal(region.words_received, np.array(ref["received"]))
    np.testing.assert_array_equal(region.link_busy, np.array(ref["links"]))
    assert (
        region.wavelets_sent,
        region.wavelets_delivered,
        region.wavelets_dropped,
        region.faults,
    ) == ref["wavelets"]


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 8),
    st.integers(2, 8),
    st.integers(1, 4),
    st.integers(-3, 3),
    st.integers(-3, 3),
    st.data(),
)
def test_data_moves_match_the_naive_reference(h, w, k, dr, dc, data):
    from wse_sim.dataops import allreduce_data
    from wse_sim.reference import naive_allreduce, naive_shift

    values = np.array(
        data.draw(st.lists(st.integers(-9, 9), min_size=h * w * k, max_size=h * w * k)), np.float32
    )
    values = values.reshape(h, w, k)
    region = ws.Wafer(ws.get_arch("wse2", rows=h, cols=w)).allocate("job", 0, 0, h, w)
    moved, _ = ws.shift(region, None, values, dr, dc)
    np.testing.assert_array_equal(moved, np.array(naive_shift(values.tolist(), dr, dc), np.float32))
    summed, _ = allreduce_data(region, None, values)
    np.testing.assert_array_equal(summed, np.array(naive_allreduce(values.tolist()), np.float32))


@pytest.mark.parametrize("latencies", LATENCIES)
@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=2, max_size=8), st.integers(1, 9), st.data())
def test_tree_reduction_matches_the_naive_reference(latencies, clocks, k, data):
    from wse_sim.reference import naive_reduce_tree_cycles

    root = data.draw(st.integers(0, len(clocks) - 1))
    arch = ws.get_arch("wse2", rows=1, cols=len(clocks), **latencies)
    region = ws.Wafer(arch).allocate("job", 0, 0, 1, len(clocks))
    region.clock[0, :] = clocks
    ws.reduce_row(region, None, k, root=root, algorithm="tree")
    assert int(region.clock[0, root]) == naive_reduce_tree_cycles(clocks, k, root, arch)


@pytest.mark.parametrize("latencies", LATENCIES[:2])
@settings(max_examples=20, deadline=None)
@given(st.integers(2, 8), st.integers(2, 8), st.integers(1, 9), st.data())
def test_cycle_engine_matches_the_naive_reference_on_transfers_and_broadcasts(
    latencies, h, w, k, data
):
    from wse_sim.cycle import CycleFabric

    arch = ws.get_arch("wse2", rows=h, cols=w, **latencies)
    src = (data.draw(st.integers(0, h - 1)), data.draw(st.integers(0, w - 1)))
    dst = (data.draw(st.integers(0, h - 1)), data.draw(st.integers(0, w - 1)))
    if src != dst:
        naive = NaiveRegion(h, w, arch)
        naive.transfer((src[0], src[1], 1, 1), dst[0] - src[0], dst[1] - src[1], k)
        fabric = CycleFabric(h, w, arch=arch)
        fabric.add_transfer(0, src, dst, k)
        assert fabric.run() == naive.clock[dst[0]][dst[1]]
    root = data.draw(st.integers(0, w - 1))
    naive = NaiveRegion(h, w, arch)
    naive.broadcast_row((0, 0, h, w), k, root)
    fabric = CycleFabric(h, w, arch=arch)
    fabric.add_row_broadcast(0, (0, 0, h, w), root, k)
    fabric.run()
    for i in range(h):
        for j in range(w):
            if j != root:
                assert fabric.recv_last[0, i, j] == naive.clock[i][j]
