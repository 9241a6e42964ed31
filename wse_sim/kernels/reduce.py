"""Row/column all-reduce of a K-word vector over a rect (after csl-examples' reduction and
WaferLLM's collectives): every PE ends with the sum over the rect."""

from __future__ import annotations

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.arch import WSE2, Arch
from wse_sim.dataops import allreduce_data
from wse_sim.fabric import Region
from wse_sim.kernels.common import KernelResult


def allreduce_kernel(region: Region, values: np.ndarray, rect: Rect | None = None) -> KernelResult:
    """values [h, w, K] -> every PE's sum over the rect. value: [h, w, K]."""
    r, c, h, w = region.rect(rect)
    xp = region.xp
    start = xp.amax(region.clock[r : r + h, c : c + w])
    out, _ = allreduce_data(region, (r, c, h, w), xp.asarray(np.asarray(values, np.float32)))
    cycles = xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(out), cycles)


def allreduce_cycles(grid: tuple[int, int], k: int, arch: Arch | None = None) -> int:
    """Analytic cycles from idle on `arch` (default WSE-2's constants), per side of n > 1 PEs:
    a chain reduce (n - 1)(2 r + l) + K - 1 and a broadcast 2 r + (n - 1) l + K - 1, with
    r = ramp and l = hop latency; 2 (n + K - 2) per side with free RAMPs (r = 0, l = 1)."""
    arch = arch or WSE2
    lat = arch.path_latency
    return sum((n - 1) * lat(1) + lat(n - 1) + 2 * (k - 1) for n in grid if n > 1)
