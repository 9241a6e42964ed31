"""Collectives that move real per-PE data and charge the block engine in the same call.

Data arrays are shaped [h, w, ...] for the rect (backend arrays); K = elements per PE.
Each function returns (result data, cycles).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.block import shift
from wse_sim.collectives import allreduce, broadcast_col, broadcast_row, reduce_col, reduce_row
from wse_sim.fabric import Region

__all__ = [
    "shift",
    "broadcast_row_data",
    "broadcast_col_data",
    "reduce_row_data",
    "reduce_col_data",
    "allreduce_data",
    "words_of",
]


def words_of(data: Any) -> int:
    """Elements per PE of a [h, w, ...] array (one 32-bit wavelet each)."""
    return int(np.prod(tuple(data.shape[2:]), dtype=np.int64))


def broadcast_row_data(
    region: Region, rect: Rect | None, data: Any, root: int = 0
) -> tuple[Any, int]:
    """Every PE of each row gets the root column's data: out[a, b] = data[a, root].

    `out` is a read-only broadcast view [h, w, ...] (no copy); copy it before writing."""
    cycles = broadcast_row(region, rect, words_of(data), root)
    return _spread(region, data[:, root : root + 1], data.shape), cycles


def broadcast_col_data(
    region: Region, rect: Rect | None, data: Any, root: int = 0
) -> tuple[Any, int]:
    """Every PE of each column gets the root row's data: out[a, b] = data[root, b].

    `out` is a read-only broadcast view [h, w, ...] (no copy); copy it before writing."""
    cycles = broadcast_col(region, rect, words_of(data), root)
    return _spread(region, data[root : root + 1], data.shape), cycles


def _spread(region: Region, part: Any, shape: tuple[int, ...]) -> Any:
    """A broadcast view of `part` over `shape` in the region's array library."""
    if region.xp.torch is not None:
        return part.expand(*shape)
    return np.broadcast_to(part, shape)


def reduce_row_data(
    region: Region, rect: Rect | None, data: Any, root: int = 0, algorithm: str = "chain"
) -> tuple[Any, int]:
    """Row sums land on the root column: returns ([h, ...] sums, cycles)."""
    cycles = reduce_row(region, rect, words_of(data), root, algorithm)
    return data.sum(1), cycles


def reduce_col_data(
    region: Region, rect: Rect | None, data: Any, root: int = 0, algorithm: str = "chain"
) -> tuple[Any, int]:
    """Column sums land on the root row: returns ([w, ...] sums, cycles)."""
    cycles = reduce_col(region, rect, words_of(data), root, algorithm)
    return data.sum(0), cycles


def allreduce_data(
    region: Region, rect: Rect | None, data: Any, algorithm: str = "chain"
) -> tuple[Any, int]:
    """Every PE ends with the sum over the rect: out[a, b] = data.sum((0, 1))."""
    cycles = allreduce(region, rect, words_of(data), algorithm)
    total = data.sum(0).sum(0)
    out = region.xp.zeros_like(data)
    out[...] = total
    return out, cycles
