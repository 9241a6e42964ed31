"""Row/column all-reduce of a K-word vector over a rect (after csl-examples' reduction and
WaferLLM's collectives): every PE ends with the sum over the rect."""

from __future__ import annotations

import numpy as np

from wse_sim.dataops import allreduce_data
from wse_sim.fabric import Rect, Region
from wse_sim.kernels.common import KernelResult


def allreduce_kernel(region: Region, values: np.ndarray, rect: Rect | None = None) -> KernelResult:
    """values [h, w, K] -> every PE's sum over the rect. value: [h, w, K]."""
    r, c, h, w = region.rect(rect)
    xp = region.xp
    start = xp.amax(region.clock[r : r + h, c : c + w])
    out, _ = allreduce_data(region, (r, c, h, w), xp.asarray(np.asarray(values, np.float32)))
    cycles = xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(out), cycles)


def allreduce_cycles(grid: tuple[int, int], k: int) -> int:
    """Analytic cycles from idle: 2 (w + K - 2) + 2 (h + K - 2), a phase per side longer than 1."""
    h, w = grid
    return 2 * (w + k - 2) * (w > 1) + 2 * (h + k - 2) * (h > 1)
