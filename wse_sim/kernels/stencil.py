"""7-point stencil sweep (after Rocki et al., SC20): x, y on the PE grid, z in each PE's SRAM.

out = c0 * u + c1 * (six neighbours), zero outside the grid. Each sweep exchanges the z-columns
with the four mesh neighbours (four shifts of Z words) and then computes 13 FLOPs per point.
"""

from __future__ import annotations

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.block import compute, shift
from wse_sim.fabric import Region
from wse_sim.kernels.common import KernelResult, compute_cycles

FLOPS_PER_POINT = 13  # 7 multiplies, 6 adds


def stencil7(
    region: Region,
    u: np.ndarray,
    sweeps: int = 1,
    c0: float = -6.0,
    c1: float = 1.0,
    rect: Rect | None = None,
) -> KernelResult:
    """Apply the stencil `sweeps` times to u [X, Y, Z], X x Y = the rect's PEs. value: [X, Y, Z]."""
    r, c, h, w = region.rect(rect)
    if u.shape[:2] != (h, w):
        raise ValueError(f"u's first two axes {u.shape[:2]} must equal the rect's PEs {(h, w)}")
    xp, z = region.xp, u.shape[2]
    grid = (r, c, h, w)
    region.sram_alloc("stencil", 4 * 3 * z, grid)
    field = xp.asarray(np.asarray(u, np.float32))
    start = xp.amax(region.clock[r : r + h, c : c + w])
    for _ in range(sweeps):
        total = xp.zeros_like(field)
        for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
            moved, _ = shift(region, grid, field, dr, dc)
            total = total + moved
        total[:, :, 1:] += field[:, :, :-1]
        total[:, :, :-1] += field[:, :, 1:]
        compute(region, grid, FLOPS_PER_POINT * z)
        field = c0 * field + c1 * total
    region.sram_free("stencil")
    cycles = xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(field), cycles)


def stencil7_cycles(region: Region, grid: tuple[int, int], z: int, sweeps: int = 1) -> int:
    """Analytic cycles from idle: sweeps * ((2 r + l + Z - 1) per exchanged direction
    + ceil(13 Z / rate)), r = ramp and l = hop latency (Z per direction when r = 0, l = 1)."""
    h, w = grid
    exchanges = 2 * (w > 1) + 2 * (h > 1)
    one_hop = region.arch.path_latency(1) + z - 1
    return sweeps * (exchanges * one_hop + compute_cycles(region, FLOPS_PER_POINT * z))


def stencil7_numpy(u: np.ndarray, c0: float = -6.0, c1: float = 1.0) -> np.ndarray:
    """Plain numpy reference of one sweep with zero boundaries."""
    p = np.pad(u, 1)
    nb = (
        p[2:, 1:-1, 1:-1]
        + p[:-2, 1:-1, 1:-1]
        + p[1:-1, 2:, 1:-1]
        + p[1:-1, :-2, 1:-1]
        + p[1:-1, 1:-1, 2:]
        + p[1:-1, 1:-1, :-2]
    )
    swept: np.ndarray = c0 * u + c1 * nb
    return swept
