"""Per-PE utilization and SRAM pictures (PNG via Pillow) and summaries of a region or a wafer.

The same data is available as arrays (`utilization_grid`, `sram_grid`) for the API.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from wse_sim import heatmap
from wse_sim.fabric import Region, Wafer

MAX_SUMMARY_SIDE = 64


def utilization_grid(target: Region | Wafer) -> np.ndarray:
    """float64 [rows, cols]: busy / elapsed per PE; on a wafer, NaN where no region is."""
    if isinstance(target, Region):
        return target.utilization()
    return _wafer_grid(target, lambda reg: reg.utilization())


def sram_grid(target: Region | Wafer) -> np.ndarray:
    """float64 [rows, cols]: SRAM high-water mark as a fraction of the PE's capacity."""
    if isinstance(target, Region):
        return target.xp.to_numpy(target.sram_hwm).astype(np.float64) / target.arch.sram_bytes
    return _wafer_grid(target, lambda reg: sram_grid(reg))


def _wafer_grid(wafer: Wafer, per_region: Any) -> np.ndarray:
    grid = np.full((wafer.rows, wafer.cols), np.nan)
    for reg in wafer.regions.values():
        grid[reg.row : reg.row + reg.rows, reg.col : reg.col + reg.cols] = per_region(reg)
    return grid


def downsample(grid: np.ndarray, max_side: int = MAX_SUMMARY_SIDE) -> np.ndarray:
    """Block-average a [rows, cols] grid so neither side exceeds max_side (NaN-aware)."""
    rows, cols = grid.shape
    fr, fc = -(-rows // max_side), -(-cols // max_side)
    if fr == 1 and fc == 1:
        return grid.astype(np.float64)
    pr, pc = -(-rows // fr) * fr, -(-cols // fc) * fc
    padded = np.full((pr, pc), np.nan)
    padded[:rows, :cols] = grid
    blocks = padded.reshape(pr // fr, fr, pc // fc, fc)
    with warnings.catch_warnings():  # blocks wholly off-region average to NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        means: np.ndarray = np.nanmean(blocks, axis=(1, 3))
        return means


def _origin(target: Region | Wafer) -> tuple[int, int]:
    return (target.row, target.col) if isinstance(target, Region) else (0, 0)


def heatmap_png(
    grid: np.ndarray,
    path: str | Path,
    min_side: int = 256,
    *,
    title: str = "per PE",
    unit: str = "",
    origin: tuple[int, int] = (0, 0),
) -> Path:
    """Write a [rows, cols] grid (NaN: no value) as a PNG with axes, a colour bar and a colour
    scale from 0 to the data's maximum (`wse_sim.heatmap.render`)."""
    return heatmap.render(grid, path, title=title, unit=unit, origin=origin, min_side=min_side).path


def utilization_png(target: Region | Wafer, path: str | Path) -> Path:
    """Per-PE utilization heatmap of a region or a whole wafer (free PEs grey)."""
    return heatmap_png(
        utilization_grid(target),
        path,
        title="PE utilization: busy cycles / elapsed cycles",
        unit="fraction busy",
        origin=_origin(target),
    )


def sram_png(target: Region | Wafer, path: str | Path) -> Path:
    """Per-PE SRAM high-water heatmap of a region or a whole wafer, in KiB (free PEs grey)."""
    capacity_kib = target.arch.sram_bytes / 1024
    return heatmap_png(
        sram_grid(target) * capacity_kib,
        path,
        title=f"SRAM high-water mark per PE (of {capacity_kib:g} KiB)",
        unit="KiB",
        origin=_origin(target),
    )


def heatmap_scales(target: Region | Wafer) -> dict[str, dict[str, Any]]:
    """The colour scale of each heatmap (what its colour bar's ends mean)."""
    capacity_kib = target.arch.sram_bytes / 1024
    util = heatmap.Scale.fitted(utilization_grid(target))
    sram = heatmap.Scale.fitted(sram_grid(target) * capacity_kib)
    return {
        "utilization": {"min": util.vmin, "max": util.vmax, "unit": "fraction busy"},
        "sram": {"min": sram.vmin, "max": sram.vmax, "unit": "KiB"},
    }


def region_summary(region: Region) -> dict[str, object]:
    """Numbers for the performance report; per-PE arrays are at most 64 x 64 nested lists."""
    util = region.utilization()
    hwm = region.xp.to_numpy(region.sram_hwm)
    return {
        "owner": region.owner,
        "rows": region.rows,
        "cols": region.cols,
        "cycles": region.cycles,
        "seconds": region.seconds,
        "utilization_mean": float(util.mean()),
        "utilization_max": float(util.max()),
        "sram_hwm_max_bytes": int(hwm.max()),
        "sram_hwm_mean_bytes": float(hwm.mean()),
        "sram_capacity_bytes": region.arch.sram_bytes,
        "wavelets_sent": region.wavelets_sent,
        "wavelets_delivered": region.wavelets_delivered,
        "wavelets_dropped": region.wavelets_dropped,
        "faults": region.faults,
        "utilization_grid": downsample(util).round(4).tolist(),
        "sram_hwm_grid": downsample(hwm.astype(np.float64)).round(1).tolist(),
        "words_sent_grid": downsample(region.xp.to_numpy(region.words_sent).astype(np.float64))
        .round(1)
        .tolist(),
    }
