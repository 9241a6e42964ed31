"""The cycle engine (routers, colors, back-pressure) and the block engine agree on timing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws
from wse_sim.cycle import CycleFabric
from wse_sim.cycle_flows import add_col_broadcast


def block_region(rows, cols):
    return ws.Wafer(ws.get_arch("wse2", rows=rows, cols=cols)).allocate("job", 0, 0, rows, cols)


@settings(max_examples=15, deadline=None)
@given(
    st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(1, 20)
)
def test_single_transfer_matches_the_block_engine_exactly(r0, c0, r1, c1, k):
    if (r0, c0) == (r1, c1):
        return
    fabric = CycleFabric(8, 8)
    fabric.add_transfer(0, (r0, c0), (r1, c1), k)
    region = block_region(8, 8)
    assert fabric.run() == ws.transfer(region, (r0, c0, 1, 1), (r1, c1, 1, 1), k) == region.cycles
    assert fabric.recv_count[0, r1, c1] == k
    assert fabric.recv_value[0, r1, c1] == k - 1  # word k carries value k: the last arrives last


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 10), st.integers(1, 6), st.integers(1, 16), st.data())
def test_row_and_column_broadcasts_match_per_pe(width, height, k, data):
    root = data.draw(st.integers(0, width - 1))
    fabric = CycleFabric(height, width)
    fabric.add_row_broadcast(0, (0, 0, height, width), root, k)
    fabric.run()
    region = block_region(height, width)
    ws.broadcast_row(region, None, k, root=root)
    receivers = [j for j in range(width) if j != root]
    assert (fabric.recv_last[0][:, receivers] == region.clock[:, receivers]).all()
    column = CycleFabric(width, height)
    add_col_broadcast(column, 0, (0, 0, width, height), root, k)
    col_region = block_region(width, height)
    assert column.run() == ws.broadcast_col(col_region, None, k, root=root)


@pytest.mark.parametrize("k", [1, 5, 40])
def test_two_flows_sharing_a_link_take_twice_as_long_in_both_engines(k):
    alone = CycleFabric(4, 4)
    alone.add_transfer(0, (0, 0), (0, 1), k)
    shared = CycleFabric(4, 4)
    shared.add_transfer(0, (0, 0), (0, 1), k)
    shared.add_transfer(1, (0, 0), (0, 1), k)
    region = block_region(4, 4)
    ws.transfer(region, (0, 0, 1, 1), (0, 1, 1, 1), k)
    ws.transfer(region, (0, 0, 1, 1), (0, 1, 1, 1), k)
    assert shared.run() == 2 * alone.run() == region.cycles


@pytest.mark.parametrize("k", [4, 30])
def test_merging_flows_are_close_to_the_block_engines_serialised_estimate(k):
    fabric = CycleFabric(4, 6)
    fabric.add_transfer(0, (0, 0), (0, 4), k)
    fabric.add_transfer(1, (0, 2), (0, 4), k)
    region = block_region(4, 6)
    ws.transfer(region, (0, 0, 1, 1), (0, 4, 1, 1), k)
    ws.transfer(region, (0, 2, 1, 1), (0, 4, 1, 1), k)
    cycle = fabric.run()
    assert cycle >= 2 * k
    assert 0 <= region.cycles - cycle <= 4  # the block engine serialises, never undercuts


def test_back_pressure_stalls_the_senders():
    fabric = CycleFabric(2, 3)
    fabric.add_transfer(0, (0, 0), (0, 1), 20)
    fabric.add_transfer(1, (0, 2), (0, 1), 20)
    assert fabric.run() == 40  # one RAMP: one wavelet per cycle into the PE
    assert max(fabric.inject_done[0, 0, 0], fabric.inject_done[1, 0, 2]) > 30


def test_wavelets_routed_off_the_region_are_dropped_and_conserved():
    fabric = CycleFabric(3, 3)
    fabric.route(0, (0, 0, 3, 1), "RAMP", ["W", "E"])  # W leaves the region
    fabric.route(0, (0, 1, 3, 1), "W", "RAMP")
    fabric.send(0, (0, 0, 3, 1), 7)
    fabric.run()
    assert fabric.dropped == 3 * 7 and fabric.delivered == 3 * 7
    assert fabric.sent == fabric.delivered + fabric.dropped


def test_unrouted_wavelets_are_dropped_instead_of_blocking():
    fabric = CycleFabric(2, 2)
    fabric.route(0, (0, 0, 1, 1), "RAMP", "E")  # no route at (0, 1)
    fabric.send(0, (0, 0, 1, 1), 5)
    fabric.run()
    assert fabric.dropped == 5 and fabric.in_flight() == 0


def test_large_regions_are_refused_with_advice():
    with pytest.raises(ws.CycleEngineLimitError, match="block engine"):
        CycleFabric(300, 300)
