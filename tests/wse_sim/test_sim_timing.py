"""Timing rules a user of the simulator can check with a pencil.

A wavelet from a PE to a PE m >= 1 fabric hops away crosses d = m + 2 links: the sender's RAMP
into its router, m fabric links, the RAMP into the receiver (one cycle each by default). With
ramp_latency=0 (free RAMPs) the numbers are the older model's, d = m.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws

RAMP_CASES = [
    pytest.param({}, 1, id="default-ramp"),
    pytest.param({"ramp_latency": 0}, 0, id="ramp0"),
]


def fresh(rows=16, cols=16, **overrides):
    arch = ws.get_arch("wse2", rows=rows, cols=cols, **overrides)
    return ws.Wafer(arch).allocate("job", 0, 0, rows, cols)


def test_one_word_to_a_neighbour_crosses_three_links():
    """RAMP out (1) + one fabric link (1) + RAMP in (1); free RAMPs leave the fabric link only."""
    assert ws.transfer(fresh(), (0, 0, 1, 1), (0, 1, 1, 1), 1) == 3
    assert ws.transfer(fresh(ramp_latency=0), (0, 0, 1, 1), (0, 1, 1, 1), 1) == 1


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(1, 64),
)
def test_k_words_over_d_hops_take_d_plus_k_minus_1(overrides, ramp, r0, c0, r1, c1, k):
    """d counts the links crossed: m fabric hops plus the two RAMPs (m + 2 by default, m with
    ramp_latency=0). A PE's transfer to itself is a local copy of K cycles."""
    region = fresh(**overrides)
    m = abs(r1 - r0) + abs(c1 - c0)
    cycles = ws.transfer(region, (r0, c0, 1, 1), (r1, c1, 1, 1), k)
    expected = (m + 2 * ramp) + k - 1 if m else k
    assert cycles == expected and region.cycles == expected
    assert int(region.clock[r1, c1]) == expected


@pytest.mark.parametrize("ramp,hop", [(1, 2), (0, 2), (2, 3)])
def test_the_block_engine_honours_the_hop_and_ramp_latencies(ramp, hop):
    region = fresh(ramp_latency=ramp, hop_latency=hop)
    assert ws.transfer(region, (1, 1, 1, 1), (4, 6, 1, 1), 7) == ramp + 8 * hop + ramp + 7 - 1
    region = fresh(ramp_latency=ramp, hop_latency=hop)
    assert ws.broadcast_row(region, (0, 0, 2, 6), 4, root=1) == 2 * ramp + 4 * hop + 4 - 1


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
@settings(max_examples=20, deadline=None)
@given(st.integers(1, 15), st.integers(1, 50), st.integers(1, 8))
def test_row_and_column_broadcast_over_l_pes_take_k_plus_l_minus_1(
    overrides, ramp, length, k, rows
):
    """K + L - 1 with free RAMPs (ramp_latency=0); with the default constants the root's RAMP
    out and each receiver's RAMP in add one cycle each: K + L - 1 + 2 * ramp_latency."""
    expected = k + length - 1 + 2 * ramp
    region = fresh(**overrides)
    assert ws.broadcast_row(region, (0, 0, rows, length + 1), k, root=0) == expected
    region = fresh(**overrides)
    assert ws.broadcast_col(region, (0, 0, length + 1, rows), k, root=0) == expected
    assert region.cycles == expected


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
def test_broadcast_from_the_middle_reaches_both_ends(overrides, ramp):
    region = fresh(**overrides)
    assert ws.broadcast_row(region, (0, 0, 1, 9), 10, root=4) == 10 + 4 - 1 + 2 * ramp
    assert int(region.clock[0, 0]) == int(region.clock[0, 8]) == 10 + 4 - 1 + 2 * ramp


def test_corner_to_corner_on_a_full_wse2_respects_the_wafer_diameter():
    """The anchors' bound: corner to corner on a full WSE-2 takes >= 1,744 cycles. One word
    from PE (0, 0) to PE (749, 993) crosses 749 + 993 fabric links and two RAMPs: 1,744."""
    wafer = ws.Wafer("wse2")
    region = wafer.allocate("job", 0, 0, 750, 994)
    assert (wafer.rows, wafer.cols) == (750, 994)
    one_word = ws.transfer(region, (0, 0, 1, 1), (749, 993, 1, 1), 1)
    assert one_word == 749 + 993 + 2 == 1744
    assert region.cycles == 1744
    assert region.seconds >= 1744 / 850e6
    free_ramps = ws.Wafer(ws.get_arch("wse2", ramp_latency=0)).allocate("job", 0, 0, 750, 994)
    assert ws.transfer(free_ramps, (0, 0, 1, 1), (749, 993, 1, 1), 1) == 1742  # below the bound


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
@pytest.mark.parametrize("k", [1, 16, 200])
def test_two_flows_sharing_a_link_serialise_their_words(overrides, ramp, k):
    """Two flows sharing a link take twice as long as one on that link: the second flow's K words
    queue behind the first's, so the senders are busy 2K cycles instead of K and the last word
    lands K cycles later. End to end that is twice one flow's time only when the path latency is
    one cycle (free RAMPs, one hop); a fixed latency L is paid once: L + 2K - 1 vs L + K - 1."""
    alone = fresh(**overrides)
    one = ws.transfer(alone, (0, 0, 1, 1), (0, 1, 1, 1), k)
    shared = fresh(**overrides)
    ws.transfer(shared, (0, 0, 1, 1), (0, 1, 1, 1), k)
    ws.transfer(shared, (0, 0, 1, 1), (0, 1, 1, 1), k)
    assert one == 1 + 2 * ramp + k - 1
    assert shared.cycles == one + k >= 2 * k
    # The sender is held (back-pressure) twice as long: K cycles alone, 2K when sharing.
    assert int(alone.clock[0, 0]) == k and int(shared.clock[0, 0]) == 2 * k
    if ramp == 0:
        assert shared.cycles >= 2 * one  # the literal rule: a one-hop path's latency is 1


def test_flows_through_one_link_from_different_sources_serialise():
    region = fresh()
    ws.transfer(region, (0, 0, 1, 1), (0, 3, 1, 1), 100)
    ws.transfer(region, (0, 1, 1, 1), (0, 3, 1, 1), 100)
    assert region.cycles >= 2 * 100
    assert region.link_busy[0, 1, 2] >= 200  # the shared east link of PE (0, 1)


def test_compute_costs_flops_at_the_pe_rate():
    region = fresh()
    assert ws.compute(region, (0, 0, 2, 2), 1000) == 500
    assert ws.compute(region, (0, 0, 2, 2), 1000, dtype="float16") == 125
    assert region.cycles == 625 and int(region.busy[0, 0]) == 625 and int(region.busy[3, 3]) == 0


def test_host_transfers_pay_the_transaction_overhead_and_the_channel_rate():
    region = fresh()
    arch = region.arch
    small = ws.host_to_region(region, 1)
    assert small >= arch.host_txn_overhead_s * arch.clock_hz
    big = ws.region_to_host(region, 10_000_000)
    assert big > small + 10_000_000 * 32 / (arch.max_memcpy_channels * 7e9) * arch.clock_hz * 0.99


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
def test_barrier_levels_clocks(overrides, ramp):
    """Per side of 4 PEs: a one-word chain reduce, 3 stages of (2 ramp + 1), and a broadcast
    back over 3 hops, 2 ramp + 3; 2 * 3 + 2 * 3 with free RAMPs."""
    region = fresh(4, 4, **overrides)
    ws.compute(region, (0, 0, 1, 1), 100)
    cost = ws.barrier(region)
    assert cost == 2 * (3 * (2 * ramp + 1) + (2 * ramp + 3))
    assert (region.clock == 50 + cost).all()
    assert ws.allreduce(fresh(4, 4, **overrides), None, 1) == cost  # what it stands for
    assert ws.barrier(fresh(1, 1, **overrides)) == 0


@pytest.mark.parametrize("overrides,ramp", RAMP_CASES)
def test_tree_and_chain_reductions_follow_their_formulas(overrides, ramp):
    """Tree level l: one move of 2^l hops (2 ramp + 2^l + K - 1); chain: 15 one-hop stages,
    each through a PE (2 ramp + 1), then K - 1."""
    region = fresh(1, 16, **overrides)
    k = 8
    assert ws.reduce_row(region, None, k, root=0, algorithm="tree") == sum(
        2 * ramp + 2**lv + k - 1 for lv in range(4)
    )
    region = fresh(1, 16, **overrides)
    assert ws.reduce_row(region, None, k, root=0) == k + 15 * (2 * ramp + 1) - 1


def test_transfer_between_rects_of_different_shapes_conserves_words():
    region = fresh(8, 8)
    cycles = ws.transfer(region, (0, 0, 2, 4), (4, 0, 4, 3), 5)  # 40 words into 12 PEs
    assert cycles >= 4 and int(region.words_received.sum()) == 40
    assert region.wavelets_sent == region.wavelets_delivered == 40
    spill = fresh(8, 8)
    ws.transfer(spill, (0, 0, 2, 2), (6, 6, 4, 4), 4)  # 3/4 of the target lies off-region
    assert spill.wavelets_dropped > 0 and spill.faults == 1
    assert spill.wavelets_sent == spill.wavelets_delivered + spill.wavelets_dropped
