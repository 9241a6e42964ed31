"""The report's heatmaps as a person reads them: a colour scale fitted to the data, a colour bar
that spans it, axes in wafer PE coordinates, grey where no job is."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import wse_sim as ws
from wse_sim import heatmap, report

TOP = tuple(int(c) for c in heatmap.RAMP[-1])
BOTTOM = tuple(int(c) for c in heatmap.RAMP[0])


def _pixel(path, x: int, y: int) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    with Image.open(path) as image:
        return image.convert("RGB").getpixel((x, y))  # type: ignore[return-value]


def _cell_centre(rendering: heatmap.Rendering, row: int, col: int) -> tuple[int, int]:
    half = rendering.pixels_per_pe // 2
    return (
        rendering.plot[0] + col * rendering.pixels_per_pe + half,
        rendering.plot[1] + row * rendering.pixels_per_pe + half,
    )


def _distance(a, b) -> float:  # type: ignore[no-untyped-def]
    return float(np.linalg.norm(np.subtract(a, b, dtype=float)))


def lightly_used_region():  # type: ignore[no-untyped-def]
    """A region of a real simulated wafer whose busiest PEs are 12.6 % busy: a hot corner
    computes, then every PE waits for a host transfer (the clock runs, nobody is busy)."""
    wafer = ws.Wafer(ws.get_arch("wse2", rows=64, cols=64))
    region = wafer.allocate("job", 8, 16, 16, 24)
    region.sram_alloc("weights", 6000, rect=(0, 0, 8, 24))
    ws.compute(region, (0, 0, 4, 6), 49_700)
    ws.compute(region, None, 100)
    ws.host_to_region(region, 10_000)
    return wafer, region


def test_a_job_peaking_at_0_126_uses_the_whole_colour_range(tmp_path) -> None:  # type: ignore[no-untyped-def]
    grid = np.full((16, 24), 0.01)
    grid[:4, :6] = 0.126
    grid[10, 10] = 0.063  # half way up the scale
    grid[15, 23] = 0.0
    out = heatmap.render(grid, tmp_path / "u.png", title="utilization", unit="fraction busy")
    assert out.scale == heatmap.Scale(0.0, 0.126)
    hot, cold = (
        _pixel(out.path, *_cell_centre(out, 0, 0)),
        _pixel(out.path, *_cell_centre(out, 15, 23)),
    )
    assert hot == TOP and cold == BOTTOM
    middle = _pixel(out.path, *_cell_centre(out, 10, 10))
    assert middle == tuple(int(c) for c in heatmap.RAMP[2])  # the ramp's middle colour
    # On the old fixed 0..1 scale the hottest PE sat an eighth of the way up the ramp: it looked
    # like the coldest one. Now the two ends are as far apart as the ramp allows.
    assert _distance(hot, cold) > 0.95 * _distance(TOP, BOTTOM)


def test_the_scale_follows_each_jobs_own_maximum(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for peak in (0.126, 0.5, 1.0, 7.25):
        grid = np.linspace(0.0, peak, 64).reshape(8, 8)
        out = heatmap.render(grid, tmp_path / f"{peak}.png", title="t", unit="u")
        assert out.scale.vmax == pytest.approx(peak)
        with Image.open(out.path) as image:
            assert float(image.text["sam:scale_max"]) == pytest.approx(peak)  # type: ignore[attr-defined]
            assert float(image.text["sam:scale_min"]) == 0.0  # type: ignore[attr-defined]
        assert _pixel(out.path, *_cell_centre(out, 7, 7)) == TOP
    idle = heatmap.render(np.zeros((4, 4)), tmp_path / "idle.png", title="t", unit="u")
    assert idle.scale == heatmap.Scale(0.0, 1.0)  # nothing busy: a flat picture on 0..1


def test_the_colour_bar_runs_from_the_top_colour_down_to_the_bottom_colour(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = heatmap.render(
        np.random.default_rng(0).random((20, 30)), tmp_path / "b.png", title="t", unit="u"
    )
    x0, y0, x1, y1 = out.colour_bar
    x = (x0 + x1) // 2
    assert x0 > out.plot[2], "the bar stands right of the map"
    assert _pixel(out.path, x, y0) == TOP and _pixel(out.path, x, y1 - 1) == BOTTOM
    column = [_pixel(out.path, x, y) for y in range(y0, y1)]
    from_top = [_distance(c, TOP) for c in column]
    assert all(b >= a - 1.5 for a, b in zip(from_top, from_top[1:], strict=False)), "monotone"
    with Image.open(out.path) as image:
        ink = np.asarray(image.convert("L"))
    right_of_bar = ink[y0:y1, x1 + 1 : x1 + 40]
    assert (right_of_bar < 100).sum() > 30, "the bar has tick labels"


def test_axes_are_drawn_in_wafer_coordinates_beside_the_map(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, region = lightly_used_region()
    path = report.utilization_png(region, tmp_path / "u.png")
    with Image.open(path) as image:
        assert image.text["sam:origin"] == "8,16"  # type: ignore[attr-defined]
        assert "utilization" in image.text["Title"]  # type: ignore[attr-defined]
        grey = np.asarray(image.convert("L"))
    out = heatmap.render(
        report.utilization_grid(region), tmp_path / "again.png", title="t", unit="u", origin=(8, 16)
    )
    x0, y0, x1, y1 = out.plot
    below, left = grey[y1 + 2 : y1 + 40, x0:x1], grey[y0:y1, : x0 - 2]
    assert (below < 100).sum() > 40, "column ticks and their labels under the map"
    assert (left < 100).sum() > 40, "row ticks and their labels left of the map"
    ticks = heatmap._pe_ticks(16, 24, out.pixels_per_pe, 70)
    assert ticks and all(16 <= pe < 40 for pe, _ in ticks), "labels are wafer columns"


def test_real_region_heatmaps_are_fitted_and_the_report_says_to_what(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, region = lightly_used_region()
    util = report.utilization_grid(region)
    assert util.max() == pytest.approx(0.126, abs=0.001), "the issue's lightly used job"
    path = report.utilization_png(region, tmp_path / "u.png")
    scales = report.heatmap_scales(region)
    with Image.open(path) as image:
        assert float(image.text["sam:scale_max"]) == pytest.approx(util.max())  # type: ignore[attr-defined]
    assert scales["utilization"]["max"] == pytest.approx(util.max())
    sram_kib = report.sram_grid(region).max() * region.arch.sram_bytes / 1024
    assert scales["sram"] == {"min": 0.0, "max": pytest.approx(sram_kib), "unit": "KiB"}
    assert sram_kib == pytest.approx(6000 / 1024)
    hot = report.heatmap_png(util, tmp_path / "again.png")
    with Image.open(hot) as image:
        assert TOP in {c for _, c in image.convert("RGB").getcolors(1 << 20)}  # type: ignore[union-attr]


def test_a_wafer_map_is_grey_where_no_job_is_and_stays_a_sane_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    wafer = ws.Wafer(ws.get_arch("wse2", rows=40, cols=60))
    region = wafer.allocate("job", 10, 20, 10, 20)
    ws.compute(region, None, 500)
    grid = report.utilization_grid(wafer)
    out = heatmap.render(grid, tmp_path / "w.png", title="t", unit="u")
    assert _pixel(out.path, *_cell_centre(out, 0, 0)) == heatmap.NO_VALUE
    assert _pixel(out.path, *_cell_centre(out, 12, 25)) == TOP
    thin = heatmap.render(np.ones((1, 900)), tmp_path / "thin.png", title="t", unit="u")
    with Image.open(thin.path) as image:
        assert image.width < 1200 and image.height < 400
