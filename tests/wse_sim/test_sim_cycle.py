"""The cycle engine (routers, colors, back-pressure) and the block engine agree on timing, with
the default RAMP latency (1 cycle per crossing) and with free RAMPs (ramp_latency=0)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws
from wse_sim.cycle import CycleFabric
from wse_sim.cycle_flows import add_col_broadcast

ARCHS = [
    pytest.param(ws.get_arch("wse2"), 1, id="default-ramp"),
    pytest.param(ws.get_arch("wse2", ramp_latency=0), 0, id="ramp0"),
]


def block_region(rows, cols, arch):
    arch = ws.get_arch("wse2", rows=rows, cols=cols, ramp_latency=arch.ramp_latency)
    return ws.Wafer(arch).allocate("job", 0, 0, rows, cols)


def both_engines(rows, cols, arch, flows):
    """A cycle fabric and a block-engine region of rows x cols, each given the same one-PE
    transfers `flows` [(src, dst, words)], flow i on color i."""
    fabric = CycleFabric(rows, cols, arch=arch)
    region = block_region(rows, cols, arch)
    for color, (src, dst, k) in enumerate(flows):
        fabric.add_transfer(color, src, dst, k)
        ws.transfer(region, (*src, 1, 1), (*dst, 1, 1), k)
    return fabric, region


@pytest.mark.parametrize("arch,ramp", ARCHS)
@settings(max_examples=15, deadline=None)
@given(
    st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(1, 20)
)
def test_single_transfer_matches_the_block_engine_exactly(arch, ramp, r0, c0, r1, c1, k):
    if (r0, c0) == (r1, c1):
        return
    fabric = CycleFabric(8, 8, arch=arch)
    fabric.add_transfer(0, (r0, c0), (r1, c1), k)
    region = block_region(8, 8, arch)
    assert fabric.run() == ws.transfer(region, (r0, c0, 1, 1), (r1, c1, 1, 1), k) == region.cycles
    assert region.cycles == abs(r1 - r0) + abs(c1 - c0) + 2 * ramp + k - 1
    assert fabric.recv_count[0, r1, c1] == k
    assert fabric.recv_value[0, r1, c1] == k - 1  # word k carries value k: the last arrives last


@pytest.mark.parametrize("arch,ramp", ARCHS)
@settings(max_examples=15, deadline=None)
@given(st.integers(2, 10), st.integers(1, 6), st.integers(1, 16), st.data())
def test_row_and_column_broadcasts_match_per_pe(arch, ramp, width, height, k, data):
    root = data.draw(st.integers(0, width - 1))
    fabric = CycleFabric(height, width, arch=arch)
    fabric.add_row_broadcast(0, (0, 0, height, width), root, k)
    fabric.run()
    region = block_region(height, width, arch)
    ws.broadcast_row(region, None, k, root=root)
    receivers = [j for j in range(width) if j != root]
    assert (fabric.recv_last[0][:, receivers] == region.clock[:, receivers]).all()
    column = CycleFabric(width, height, arch=arch)
    add_col_broadcast(column, 0, (0, 0, width, height), root, k)
    col_region = block_region(width, height, arch)
    far = max(root, width - 1 - root)
    assert (
        column.run() == ws.broadcast_col(col_region, None, k, root=root) == far + 2 * ramp + k - 1
    )


@pytest.mark.parametrize("arch,ramp", ARCHS)
@pytest.mark.parametrize("k", [1, 5, 40])
def test_two_flows_sharing_a_link_serialise_in_both_engines(arch, ramp, k):
    flow = ((0, 0), (0, 1), k)
    alone, _ = both_engines(4, 4, arch, [flow])
    shared, region = both_engines(4, 4, arch, [flow, flow])
    one = alone.run()
    assert one == 1 + 2 * ramp + k - 1
    assert shared.run() == one + k == region.cycles  # twice as long when ramp = 0


@pytest.mark.parametrize("arch,ramp", ARCHS)
@pytest.mark.parametrize("k", [4, 30])
def test_merging_flows_are_close_to_the_block_engines_serialised_estimate(arch, ramp, k):
    fabric, region = both_engines(4, 6, arch, [((0, 0), (0, 4), k), ((0, 2), (0, 4), k)])
    cycle = fabric.run()
    assert cycle >= 2 * k + 2 * ramp
    assert 0 <= region.cycles - cycle <= 4  # the block engine serialises, never undercuts


@pytest.mark.parametrize("arch,ramp", ARCHS)
def test_back_pressure_stalls_the_senders(arch, ramp):
    fabric = CycleFabric(2, 3, arch=arch)
    fabric.add_transfer(0, (0, 0), (0, 1), 20)
    fabric.add_transfer(1, (0, 2), (0, 1), 20)
    # one RAMP into the PE: one wavelet per cycle, so the 40 words land one after another
    # from the first arrival at cycle d = 1 + 2 * ramp
    assert fabric.run() == (1 + 2 * ramp) + 40 - 1
    assert max(fabric.inject_done[0, 0, 0], fabric.inject_done[1, 0, 2]) > 30
    region = block_region(2, 3, arch)
    ws.transfer(region, (0, 0, 1, 1), (0, 1, 1, 1), 20)
    ws.transfer(region, (0, 2, 1, 1), (0, 1, 1, 1), 20)
    assert region.cycles == fabric.completion()


@pytest.mark.parametrize("arch,ramp", ARCHS)
def test_the_ramps_are_pipeline_stages_that_hold_wavelets_in_flight(arch, ramp):
    """One word to the east neighbour: issued in cycle 0, in the router from cycle ramp,
    across the link, then ramp more cycles in the RAMP-in link before the PE has it."""
    fabric = CycleFabric(1, 2, arch=arch)
    fabric.add_transfer(0, (0, 0), (0, 1), 1)
    arrival = 1 + 2 * ramp
    for _ in range(arrival):
        fabric.step()
        assert fabric.recv_count[0, 0, 1] == 0 and fabric.in_flight() == 1
    fabric.step()
    assert fabric.recv_count[0, 0, 1] == 1 and fabric.recv_last[0, 0, 1] == arrival
    assert fabric.in_flight() == 0 and fabric.inject_done[0, 0, 0] == 1


def test_a_stalled_router_holds_the_sender_back_on_its_ramp():
    """Two colours leave PE (0, 0) eastwards over one link: one wavelet per cycle in all, so
    each sender is held at its RAMP and the pair needs 2 K cycles of link time."""
    fabric = CycleFabric(1, 2)
    fabric.add_transfer(0, (0, 0), (0, 1), 10)
    fabric.add_transfer(1, (0, 0), (0, 1), 10)
    assert fabric.run() == 3 + 20 - 1
    assert max(fabric.inject_done[:, 0, 0]) >= 19  # the later sender could not run ahead


def test_latencies_the_cycle_engine_does_not_model_are_refused():
    with pytest.raises(ws.CycleEngineLimitError, match="hop_latency=2"):
        CycleFabric(4, 4, arch=ws.get_arch("wse2", hop_latency=2))
    with pytest.raises(ws.CycleEngineLimitError, match="ramp_latency=2"):
        CycleFabric(4, 4, arch=ws.get_arch("wse2", ramp_latency=2))


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
