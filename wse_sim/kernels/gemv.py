"""GEMV y = A x over a grid of PEs (after csl-examples tutorials gemv-01..09).

PE (i, j) holds A's tile (i, j) [m, n]; x's chunk j [n] starts on row 0 and is broadcast down
each column; every PE multiplies its tile; partial y's [m] are summed along rows (chain) into
column 0, which ends with y's chunk i.
"""

from __future__ import annotations

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.block import compute
from wse_sim.dataops import broadcast_col_data, reduce_row_data
from wse_sim.fabric import Region
from wse_sim.kernels.common import KernelResult, compute_cycles, tiles


def gemv(region: Region, a: np.ndarray, x: np.ndarray, rect: Rect | None = None) -> KernelResult:
    """y = a @ x; a [M, N] split over rect's h x w PEs (h | M, w | N). value: y [M]."""
    r, c, h, w = region.rect(rect)
    xp = region.xp
    a_t = xp.asarray(tiles(np.asarray(a, np.float32), h, w))  # [h, w, m, n]
    m, n = a_t.shape[2], a_t.shape[3]
    x_chunks = np.zeros((h, w, n), np.float32)
    x_chunks[0] = np.asarray(x, np.float32).reshape(w, n)  # x starts on row 0
    start = region.xp.amax(region.clock[r : r + h, c : c + w])
    x_all, _ = broadcast_col_data(region, (r, c, h, w), xp.asarray(x_chunks), root=0)
    compute(region, (r, c, h, w), 2 * m * n)
    partial = xp.einsum("ijmn,ijn->ijm", a_t, x_all)  # [h, w, m]
    y, _ = reduce_row_data(region, (r, c, h, w), partial, root=0)  # [h, m] on column 0
    cycles = region.xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(y).reshape(h * m), cycles)


def gemv_cycles(region: Region, shape: tuple[int, int], grid: tuple[int, int]) -> int:
    """Analytic cycles from idle, with r = ramp and l = hop latency (each term only when its side
    is longer than 1): broadcast (2 r + (h - 1) l + n - 1) + ceil(2 m n / rate) + chain reduce
    ((w - 1)(2 r + l) + m - 1); with r = 0, l = 1: (h + n - 2) + compute + (w + m - 2)."""
    (mm, nn), (h, w) = shape, grid
    m, n = mm // h, nn // w
    arch = region.arch
    bcast = arch.path_latency(h - 1) + n - 1 if h > 1 else 0
    reduce = (w - 1) * arch.path_latency(1) + m - 1 if w > 1 else 0
    return bcast + compute_cycles(region, 2 * m * n) + reduce
