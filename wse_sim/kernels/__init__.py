"""Known-answer kernels, written from the published descriptions (csl-examples, SC20/SC22).

Each kernel takes numpy inputs, runs on a region through the block engine (data and clocks),
and returns a KernelResult; each has a `*_cycles` function giving its analytic cycle count
from an idle region, which tests compare with the engine.
"""

from __future__ import annotations

from wse_sim.kernels.common import KernelResult
from wse_sim.kernels.gemv import gemv, gemv_cycles
from wse_sim.kernels.life import game_of_life, life_cycles
from wse_sim.kernels.reduce import allreduce_cycles, allreduce_kernel
from wse_sim.kernels.stencil import stencil7, stencil7_cycles
from wse_sim.kernels.summa import summa, summa_cycles

__all__ = [
    "KernelResult",
    "gemv",
    "gemv_cycles",
    "summa",
    "summa_cycles",
    "stencil7",
    "stencil7_cycles",
    "game_of_life",
    "life_cycles",
    "allreduce_kernel",
    "allreduce_cycles",
]
