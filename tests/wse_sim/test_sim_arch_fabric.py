"""Architecture constants, wafer regions, the owner map and per-PE SRAM accounting."""

from __future__ import annotations

import numpy as np
import pytest

import wse_sim as ws


@pytest.mark.parametrize("name", ["wse2", "WSE-2", "wse3", "WSE-3"])
def test_arch_names_resolve_to_the_published_grids(name):
    arch = ws.get_arch(name)
    expected = (750, 994) if "2" in name else (755, 1170)
    assert (arch.rows, arch.cols) == expected
    assert arch.sram_bytes == 48 * 1024
    assert arch.wavelet_bits == 32 and arch.hop_latency == 1 and arch.link_words_per_cycle == 1
    assert arch.ramp_latency == 1 and "RAMP" in arch.router_ports
    assert "RAMP" in arch.sources["ramp_latency"] and "assume" in arch.sources["ramp_latency"]
    assert arch.path_latency(1) == 3 and arch.path_latency(10) == 12
    assert len(arch.router_ports) == 5
    assert arch.clock_hz == 850e6
    assert all(
        arch.sources.get(k) for k in ("rows/cols", "sram_bytes", "clock_hz", "fp32_flops_per_cycle")
    )


def test_wse3_has_twice_the_fp16_rate_of_wse2():
    assert ws.get_arch("wse3").fp16_flops_per_cycle == 2 * ws.get_arch("wse2").fp16_flops_per_cycle


def test_overrides_make_a_small_fabric_and_are_tagged():
    arch = ws.get_arch("wse2", rows=8, cols=6, clock_hz=1e9)
    assert (arch.rows, arch.cols, arch.clock_hz) == (8, 6, 1e9)
    assert arch.sources["clock_hz"].startswith("override")
    wafer = ws.Wafer(arch)
    assert (wafer.rows, wafer.cols) == (8, 6)


def test_latencies_are_overridable_and_validated():
    arch = ws.get_arch("wse2", rows=8, cols=8, ramp_latency=0)
    assert (arch.rows, arch.ramp_latency, arch.hop_latency) == (8, 0, 1)
    assert arch.sources["ramp_latency"].startswith("override")
    assert arch.path_latency(5) == 5
    assert ws.get_arch("wse3", hop_latency=2, ramp_latency=2).path_latency(3) == 2 + 6 + 2
    with pytest.raises(ValueError, match="ramp_latency"):
        ws.get_arch("wse2", ramp_latency=-1)
    with pytest.raises(ValueError, match="hop_latency"):
        ws.get_arch("wse2", hop_latency=0)
    with pytest.raises(ValueError, match="hop_latency"):
        ws.get_arch("wse2", hop_latency=1.5)


def test_unknown_arch_and_unknown_field_are_clear_errors():
    with pytest.raises(ws.UnknownArchError, match="wse2"):
        ws.get_arch("wse9")
    with pytest.raises(ws.UnknownArchError, match="rowz"):
        ws.get_arch("wse2", rowz=3)


def test_full_wafer_costs_no_dense_sram_image():
    wafer = ws.Wafer("wse2")
    assert (wafer.rows, wafer.cols) == (750, 994)
    assert wafer.free_pes == 750 * 994
    region = wafer.allocate("job", 0, 0, 4, 4)
    assert region.clock.shape == (4, 4)


def test_regions_fill_the_owner_map_and_release_frees_it():
    wafer = ws.Wafer("wse2", rows=10, cols=10)
    a = wafer.allocate("a", 0, 0, 4, 5)
    wafer.allocate("b", 4, 0, 6, 10)
    owners = wafer.owner_map()
    assert (owners[:4, :5] == wafer.owner_ids["a"]).all()
    assert (owners[4:, :] == wafer.owner_ids["b"]).all()
    assert (owners[:4, 5:] == -1).all()
    assert wafer.owner_at(5, 5) == "b" and wafer.owner_at(0, 9) is None
    assert (a.row, a.col, a.rows, a.cols) == (0, 0, 4, 5)
    wafer.release("a")
    assert wafer.free_pes == 4 * 10 and "a" not in wafer.regions


def test_overlap_out_of_bounds_and_duplicates_are_refused():
    wafer = ws.Wafer("wse2", rows=10, cols=10)
    wafer.allocate("a", 2, 2, 4, 4)
    with pytest.raises(ws.RegionError, match="overlaps.*'a'"):
        wafer.allocate("b", 5, 5, 3, 3)
    with pytest.raises(ws.RegionError, match="outside"):
        wafer.allocate("c", 8, 8, 3, 3)
    with pytest.raises(ws.RegionError, match="already holds"):
        wafer.allocate("a", 7, 7, 1, 1)
    with pytest.raises(ws.RegionError, match="holds no region"):
        wafer.release("zzz")


def test_sram_overflow_names_the_pe_and_the_bytes():
    region = ws.Wafer("wse2", rows=8, cols=8).allocate("job", 0, 0, 4, 4)
    limit = region.arch.sram_limit_bytes
    assert limit == 48 * 1024 - region.arch.sram_reserved_bytes
    region.sram_alloc("weights", 30_000)
    need = np.zeros((4, 4), dtype=np.int64)
    need[2, 3] = limit - 30_000 + 1
    with pytest.raises(ws.SramCapacityError) as err:
        region.sram_alloc("activations", need)
    assert err.value.pe == (2, 3) and err.value.needed == limit + 1 and err.value.limit == limit
    assert "row=2, col=3" in str(err.value) and str(limit + 1) in str(err.value)
    assert "weights" in region.allocations and "activations" not in region.allocations


def test_sram_high_water_mark_survives_frees():
    region = ws.Wafer("wse2", rows=8, cols=8).allocate("job", 0, 0, 2, 2)
    region.sram_alloc("a", 1000)
    region.sram_alloc("b", 3000, rect=(0, 0, 1, 1))
    region.sram_free("b")
    region.sram_alloc("c", 500)
    np.testing.assert_array_equal(region.sram_used, [[1500, 1500], [1500, 1500]])
    np.testing.assert_array_equal(region.sram_hwm, [[4000, 1500], [1500, 1500]])
    with pytest.raises(ws.UnknownBufferError):
        region.sram_free("b")


def test_rects_are_checked_against_the_region():
    region = ws.Wafer("wse2", rows=8, cols=8).allocate("job", 1, 1, 4, 4)
    with pytest.raises(ws.RectError, match="region-relative"):
        ws.compute(region, (2, 2, 3, 3), 10)
