"""Timing rules a user of the simulator can check with a pencil."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wse_sim as ws


def fresh(rows=16, cols=16):
    return ws.Wafer(ws.get_arch("wse2", rows=rows, cols=cols)).allocate("job", 0, 0, rows, cols)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(0, 15),
    st.integers(1, 64),
)
def test_k_words_over_d_hops_take_d_plus_k_minus_1(r0, c0, r1, c1, k):
    region = fresh()
    d = abs(r1 - r0) + abs(c1 - c0)
    cycles = ws.transfer(region, (r0, c0, 1, 1), (r1, c1, 1, 1), k)
    expected = d + k - 1 if d else k
    assert cycles == expected and region.cycles == expected


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 15), st.integers(1, 50), st.integers(1, 8))
def test_row_and_column_broadcast_over_l_pes_take_k_plus_l_minus_1(length, k, rows):
    region = fresh()
    assert ws.broadcast_row(region, (0, 0, rows, length + 1), k, root=0) == k + length - 1
    region = fresh()
    assert ws.broadcast_col(region, (0, 0, length + 1, rows), k, root=0) == k + length - 1
    assert region.cycles == k + length - 1


def test_broadcast_from_the_middle_reaches_both_ends():
    region = fresh()
    assert ws.broadcast_row(region, (0, 0, 1, 9), 10, root=4) == 10 + 4 - 1


def test_corner_to_corner_on_a_full_wse2_respects_the_wafer_diameter():
    # The anchors' 1,744 is rows + cols; the hop distance between corner PEs is 749 + 993.
    wafer = ws.Wafer("wse2")
    region = wafer.allocate("job", 0, 0, wafer.rows, wafer.cols)
    one_word = ws.transfer(region, (0, 0, 1, 1), (749, 993, 1, 1), 1)
    assert one_word == 749 + 993
    region = ws.Wafer("wse2").allocate("job", 0, 0, 750, 994)
    assert ws.transfer(region, (0, 0, 1, 1), (749, 993, 1, 1), 3) >= 1744
    assert region.seconds >= 1744 / 850e6


@pytest.mark.parametrize("k", [1, 16, 200])
def test_two_flows_sharing_a_link_take_at_least_twice_as_long_as_one(k):
    alone = fresh()
    one = ws.transfer(alone, (0, 0, 1, 1), (0, 1, 1, 1), k)
    shared = fresh()
    ws.transfer(shared, (0, 0, 1, 1), (0, 1, 1, 1), k)
    ws.transfer(shared, (0, 0, 1, 1), (0, 1, 1, 1), k)
    assert shared.cycles >= 2 * one


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


def test_barrier_levels_clocks():
    region = fresh(4, 4)
    ws.compute(region, (0, 0, 1, 1), 100)
    cost = ws.barrier(region)
    assert cost == 2 * 3 + 2 * 3
    assert (region.clock == 50 + cost).all()


def test_tree_reduction_follows_its_level_formula():
    region = fresh(1, 16)
    k = 8
    assert ws.reduce_row(region, None, k, root=0, algorithm="tree") == sum(
        2**lv + k - 1 for lv in range(4)
    )
    region = fresh(1, 16)
    assert ws.reduce_row(region, None, k, root=0) == k + 15 - 1


def test_transfer_between_rects_of_different_shapes_conserves_words():
    region = fresh(8, 8)
    cycles = ws.transfer(region, (0, 0, 2, 4), (4, 0, 4, 3), 5)  # 40 words into 12 PEs
    assert cycles >= 4 and int(region.words_received.sum()) == 40
    assert region.wavelets_sent == region.wavelets_delivered == 40
    spill = fresh(8, 8)
    ws.transfer(spill, (0, 0, 2, 2), (6, 6, 4, 4), 4)  # 3/4 of the target lies off-region
    assert spill.wavelets_dropped > 0 and spill.faults == 1
    assert spill.wavelets_sent == spill.wavelets_delivered + spill.wavelets_dropped
