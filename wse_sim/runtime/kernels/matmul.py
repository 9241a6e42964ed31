"""Distributed matmul kernels (mm, addmm, bmm): SUMMA over the kernel's rectangle of PEs.

PE (i, j) of an h x w rectangle owns output tile C[i, j]. At SUMMA step s the PEs of column s
broadcast their A panel along their rows and the PEs of row s broadcast their B panel down their
columns; every PE then accumulates C[i, j] += A[i, s] @ B[s, j]. The contraction dimension K is
therefore split into `summa_steps(K, w)` panels whose partial products are summed, exactly as
the PEs do; all tiles are computed at once as one batched matmul over the panel stack
([steps, M, K/steps] @ [steps, K/steps, N]), never as a per-PE Python loop. Splitting M and N
over PEs changes no arithmetic, so it is implicit. Fabric broadcasts are charged by the timing
plan (`wse_sim.runtime.timing`).

With fp16 the operands and the product are rounded to float16 (the PE multiplies in fp16 and
accumulates in fp32), which is what the wafer's mixed-precision datapath does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from wse_sim.runtime.kernels.registry import KernelImpl, NodeContext, Scalar, factory

# Each SUMMA step is one accumulated matmul on the host. Past this many steps the host cost grows
# with the rectangle's width while the rounding it models stops changing, so wider rectangles
# accumulate several steps' panels per host matmul (the cycle charge still covers every step's words).
MAX_NUMERIC_PANELS = 8


def summa_steps(k: int, cols: int) -> int:
    """Number of SUMMA broadcast steps for contraction size `k` on a rectangle `cols` wide."""
    return max(1, min(k, cols))


def round_fp16(x: np.ndarray) -> np.ndarray:
    """x rounded to float16 precision, kept as float32 (x: any shape)."""
    return np.asarray(x).astype(np.float16).astype(np.float32)


def panel_matmul(a: np.ndarray, b: np.ndarray, panels: int) -> np.ndarray:
    """C = sum_s a[..., :, K_s] @ b[..., K_s, :], accumulated panel by panel as SUMMA does.

    a: [..., M, K], b: [..., K, N] -> [..., M, N]; K is cut into `panels` contiguous panels
    (the last may be shorter).
    """
    k = a.shape[-1]
    out: np.ndarray
    if panels <= 1 or k < 2:
        out = np.matmul(a, b)
        return out
    width = -(-k // panels)
    out = np.matmul(a[..., :width], b[..., :width, :])
    for start in range(width, k, width):
        out += np.matmul(a[..., start : start + width], b[..., start : start + width, :])
    return out


def _panels(ctx: NodeContext, k: int) -> int:
    return min(summa_steps(k, ctx.rect[3]), MAX_NUMERIC_PANELS)


def _matmul_impl(ctx: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        if ctx.fp16:
            return round_fp16(panel_matmul(round_fp16(a), round_fp16(b), _panels(ctx, a.shape[-1])))
        return panel_matmul(a, b, _panels(ctx, a.shape[-1]))

    return product


@factory("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def mm(ctx: NodeContext) -> KernelImpl:
    """a @ b: [M, K] @ [K, N] -> [M, N] (bmm: [B, M, K] @ [B, K, N] -> [B, M, N])."""
    return _matmul_impl(ctx)


@factory("aten.addmm.default", "aten.baddbmm.default")
def addmm(ctx: NodeContext) -> KernelImpl:
    """beta * bias + alpha * (a @ b); bias broadcasts over rows. Shapes as `mm`."""
    product = _matmul_impl(ctx)

    def impl(
        bias: np.ndarray, a: np.ndarray, b: np.ndarray, beta: Scalar = 1, alpha: Scalar = 1
    ) -> np.ndarray:
        out = product(a, b)
        if alpha != 1:
            out = out * alpha
        y: np.ndarray = out + bias if beta == 1 else out + beta * bias
        return y

    return impl
