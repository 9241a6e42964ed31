"""SUMMA matrix multiply C = A B on a P x P grid (after csl-examples gemm-collectives_2d).

PE (i, j) holds tiles A_ij [m, k], B_ij [k, n] and accumulates C_ij [m, n]. In step s the
PEs of column s broadcast their A tiles along their rows, the PEs of row s broadcast their B
tiles down their columns, and every PE accumulates C_ij += A_is B_sj. A barrier follows each
broadcast so every step starts from equal clocks, which keeps the cycle count analytic.
"""

from __future__ import annotations

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.block import barrier, compute
from wse_sim.dataops import broadcast_col_data, broadcast_row_data
from wse_sim.fabric import Region
from wse_sim.kernels.common import KernelResult, compute_cycles, tiles


def summa(
    region: Region, a: np.ndarray, b: np.ndarray, rect: Rect | None = None, sync: bool = True
) -> KernelResult:
    """C = a @ b on a square rect of P x P PEs (P divides M, K and N). value: C [M, N].

    sync=False drops the barriers: steps overlap as far as data and links allow (faster, and
    what the hardware does); only sync=True follows `summa_cycles` exactly."""
    r, c, h, w = region.rect(rect)
    if h != w:
        raise ValueError(f"SUMMA needs a square grid of PEs, got {h}x{w}; pass a square rect")
    xp, p = region.xp, h
    a_t = xp.asarray(tiles(np.asarray(a, np.float32), p, p))  # [P, P, m, k]
    b_t = xp.asarray(tiles(np.asarray(b, np.float32), p, p))  # [P, P, k, n]
    m, k, n = a_t.shape[2], a_t.shape[3], b_t.shape[3]
    region.sram_alloc("summa", 4 * (2 * m * k + 2 * k * n + m * n), (r, c, h, w))
    # C is kept untiled, [P*m, P*n]: PE (i, j)'s tile is block (i, j), so one GEMM per step
    # computes every PE's A_is B_sj at once (the per-PE products are independent).
    c_full = xp.zeros((p * m, p * n), "float32")
    grid = (r, c, h, w)
    start = xp.amax(region.clock[r : r + h, c : c + w])
    for s in range(p):
        a_row, _ = broadcast_row_data(region, grid, a_t, root=s)  # a_row[i, j] = A_is
        if sync:
            barrier(region, grid)
        b_col, _ = broadcast_col_data(region, grid, b_t, root=s)  # b_col[i, j] = B_sj
        if sync:
            barrier(region, grid)
        compute(region, grid, 2 * m * k * n)
        a_panel = a_row[:, 0].reshape(p * m, k)  # [P*m, k]: A_is stacked over i
        b_panel = xp.swap01(b_col[0]).reshape(k, p * n)  # [k, P*n]: B_sj side by side
        c_full += xp.matmul(a_panel, b_panel)
    region.sram_free("summa")
    cycles = xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(c_full), cycles)


def summa_cycles(region: Region, shape: tuple[int, int, int], p: int) -> int:
    """Analytic cycles from idle for C[M, N] = A[M, K] B[K, N] on P x P PEs:
    sum over steps s of (L_s + mk - 1) + (L_s + kn - 1) + 2 B + ceil(2mkn / rate), with
    L_s = 2 r + D_s l the latency to the farthest PE of the broadcast, D_s = max(s, P - 1 - s)
    hops, and B = 2 ((P - 1)(2 r + l) + 2 r + (P - 1) l) the barrier (r = ramp, l = hop
    latency; with r = 0, l = 1: L_s = D_s and B = 4 (P - 1))."""
    mm, kk, nn = shape
    m, k, n = mm // p, kk // p, nn // p
    arch = region.arch
    lat = arch.path_latency
    barrier = 2 * ((p - 1) * lat(1) + lat(p - 1))
    total = 0
    for s in range(p):
        if p > 1:
            far = lat(max(s, p - 1 - s))
            total += (far + m * k - 1) + (far + k * n - 1) + 2 * barrier
        total += compute_cycles(region, 2 * m * k * n)
    return total
