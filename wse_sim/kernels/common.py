"""Shared result type of the known-answer kernels."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wse_sim.fabric import Region


@dataclass
class KernelResult:
    """`value`: the kernel's answer as numpy; `cycles`: elapsed cycles the engine charged."""

    value: np.ndarray
    cycles: int


def compute_cycles(region: Region, flops: float, dtype: str = "float32") -> int:
    """Cycles of `flops` on one PE at the arch's rate (the block engine's compute rule)."""
    return math.ceil(flops / region.arch.flops_per_cycle(dtype))


def tiles(matrix: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Split [M, N] into [rows, cols, M/rows, N/cols] tiles (PE (i, j) holds tile (i, j))."""
    m, n = matrix.shape
    if m % rows or n % cols:
        raise ValueError(
            f"a {m}x{n} matrix does not split evenly over {rows}x{cols} PEs; "
            "pad it or pick a rect whose sides divide it"
        )
    return matrix.reshape(rows, m // rows, cols, n // cols).swapaxes(1, 2)
