"""Conway's Game of Life, one cell per PE (after csl-examples game-of-life), dead outside.

Per generation: exchange with the east and west neighbours (1 word), then send the triple
(west, self, east) north and south (3 words), which brings all eight neighbours; then count
and apply the rule (charged as LIFE_FLOPS operations).
"""

from __future__ import annotations

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.block import compute, shift
from wse_sim.fabric import Region
from wse_sim.kernels.common import KernelResult, compute_cycles

LIFE_FLOPS = 10  # eight adds and two compares


def game_of_life(
    region: Region, board: np.ndarray, generations: int, rect: Rect | None = None
) -> KernelResult:
    """Run `generations` of Life on board [h, w] (0/1) laid over rect. value: the final board."""
    r, c, h, w = region.rect(rect)
    if board.shape != (h, w):
        raise ValueError(f"board shape {board.shape} must equal the rect's PEs {(h, w)}")
    xp, grid = region.xp, (r, c, h, w)
    cells = xp.asarray(np.asarray(board, np.float32).reshape(h, w, 1))
    start = xp.amax(region.clock[r : r + h, c : c + w])
    for _ in range(generations):
        from_west, _ = shift(region, grid, cells, 0, 1)
        from_east, _ = shift(region, grid, cells, 0, -1)
        row3 = xp.zeros((h, w, 3), "float32")
        row3[:, :, 0:1], row3[:, :, 1:2], row3[:, :, 2:3] = from_west, cells, from_east
        from_north, _ = shift(region, grid, row3, 1, 0)
        from_south, _ = shift(region, grid, row3, -1, 0)
        count = (
            from_west
            + from_east
            + from_north.sum(2, keepdims=True)
            + from_south.sum(2, keepdims=True)
        )
        compute(region, grid, LIFE_FLOPS)
        cells = ((count == 3) | ((cells == 1) & (count == 2))) * 1.0
        cells = xp.asarray(cells, "float32")
    cycles = xp.amax(region.clock[r : r + h, c : c + w]) - start
    return KernelResult(xp.to_numpy(cells).reshape(h, w).astype(np.int8), cycles)


def life_cycles(region: Region, grid: tuple[int, int], generations: int) -> int:
    """Analytic cycles from idle: generations * (2 d + 2 (d + 2) + ceil(LIFE_FLOPS / rate)),
    d = 2 r + l the one-hop latency (r = ramp, l = hop latency; d = 1 with free RAMPs),
    dropping the exchanges a 1-wide grid does not need."""
    h, w = grid
    d = region.arch.path_latency(1)
    per = 2 * d * (w > 1) + 2 * (d + 3 - 1) * (h > 1) + compute_cycles(region, LIFE_FLOPS)
    return generations * per


def life_numpy(board: np.ndarray) -> np.ndarray:
    """Plain numpy reference of one generation with a dead border."""
    p = np.pad(board.astype(np.int64), 1)
    h, w = board.shape
    count = sum(
        p[1 + a : 1 + a + h, 1 + b : 1 + b + w] for a in (-1, 0, 1) for b in (-1, 0, 1) if a or b
    )
    nxt: np.ndarray = ((count == 3) | ((board == 1) & (count == 2))).astype(np.int8)
    return nxt
