"""Utilization and SRAM pictures and summaries."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

import wse_sim as ws
from wse_sim import report


def busy_wafer():
    wafer = ws.Wafer(ws.get_arch("wse2", rows=100, cols=150))
    region = wafer.allocate("job", 10, 20, 80, 100)
    region.sram_alloc("weights", 20_000, rect=(0, 0, 40, 100))
    ws.compute(region, (0, 0, 40, 50), 2_000)
    ws.broadcast_row(region, None, 10)
    return wafer, region


def test_pngs_of_a_region_and_a_wafer(tmp_path):
    wafer, region = busy_wafer()
    for path in (
        report.utilization_png(region, tmp_path / "u.png"),
        report.sram_png(wafer, tmp_path / "s.png"),
        report.utilization_png(wafer, tmp_path / "w.png"),
    ):
        with Image.open(path) as image:
            assert image.format == "PNG" and min(image.size) >= 100


def test_grids_show_where_the_work_and_memory_are():
    wafer, region = busy_wafer()
    util = report.utilization_grid(region)
    assert util.shape == (80, 100)
    assert util[:40, :50].min() > 0.9 and util[40:, 50:].max() < 0.1
    whole = report.sram_grid(wafer)
    assert np.isnan(whole[0, 0]) and whole[10, 20] > 0.3 and whole[60, 20] == 0


def test_region_summary_is_json_ready_and_downsampled():
    _, region = busy_wafer()
    summary = report.region_summary(region)
    json.dumps(summary)
    assert summary["cycles"] == region.cycles
    assert summary["sram_hwm_max_bytes"] == 20_000
    assert len(summary["utilization_grid"]) <= 64 and len(summary["utilization_grid"][0]) <= 64
    assert 0 < summary["utilization_mean"] < 1
    big = ws.Wafer("wse2").allocate("big", 0, 0, 300, 500)
    assert len(report.region_summary(big)["utilization_grid"][0]) <= 64
