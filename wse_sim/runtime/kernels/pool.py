"""Pooling kernels (max, average, adaptive average) and their backward forms, over 2-D windows.

Windows are strided views of the (padded) input, so a pooling op is one reduction over the
window axes; the max-pool backward routes gradients with one bincount, never a per-PE loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wse_sim.runtime.kernels.conv import out_size, pair, windows
from wse_sim.runtime.kernels.reductions import first_near_max
from wse_sim.runtime.kernels.registry import Ints, simple

_Pair = tuple[int, int]


def _pool_geometry(
    x: np.ndarray, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool
) -> tuple[_Pair, _Pair, _Pair, _Pair, _Pair]:
    """(kernel, stride, padding, dilation, output (OH, OW)) of a 2-d pooling window."""
    k = pair(kernel)
    s = pair(stride) if stride else k
    p, d = pair(padding), pair(dilation)
    oh, ow = (
        out_size(n, kk, ss, pp, dd, ceil_mode)
        for n, kk, ss, pp, dd in zip(x.shape[-2:], k, s, p, d, strict=False)
    )
    return k, s, p, d, (oh, ow)


def _pad_for(
    x: np.ndarray, k: _Pair, s: _Pair, p: _Pair, d: _Pair, out: _Pair, value: float
) -> np.ndarray:
    """x padded by p, plus enough extra on the far side for ceil_mode windows."""
    extra = [
        max(0, (o - 1) * st + dd * (kk - 1) + 1 - (n + 2 * pp))
        for o, st, dd, kk, n, pp in zip(out, s, d, k, x.shape[-2:], p, strict=False)
    ]
    widths = ((0, 0), (0, 0), (p[0], p[0] + extra[0]), (p[1], p[1] + extra[1]))
    return np.pad(x, widths, constant_values=value)


@simple("aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(
    x: np.ndarray,
    kernel_size: Ints,
    stride: Ints = (),
    padding: Ints = 0,
    dilation: Ints = 1,
    ceil_mode: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(max over each window [N, C, OH, OW], flat H*W index of each max as int64; the first of
    values tied within rounding, as eager picks the first of a tie). An unbatched [C, H, W]
    input pools as a batch of one."""
    x = np.asarray(x)
    if x.ndim == 3:
        values, index = max_pool2d_with_indices(
            x[None], kernel_size, stride, padding, dilation, ceil_mode
        )
        return values[0], index[0]
    k, s, p, d, out = _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    win = windows(_pad_for(x, k, s, p, d, out, -np.inf), k, s, d, out).reshape(
        *x.shape[:2], *out, k[0] * k[1]
    )
    arg = first_near_max(win, -1)
    values = np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
    rows = np.arange(out[0])[:, None] * s[0] - p[0] + (arg // k[1]) * d[0]
    cols = np.arange(out[1])[None, :] * s[1] - p[1] + (arg % k[1]) * d[1]
    return values, (rows * x.shape[-1] + cols).astype(np.int64)


@simple("aten.max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(
    grad: np.ndarray,
    x: np.ndarray,
    kernel_size: Ints,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    ceil_mode: bool,
    indices: np.ndarray,
) -> np.ndarray:
    """Output grads routed back to the input position each window's max came from."""
    x, grad = np.asarray(x), np.asarray(grad)
    if x.ndim == 3:  # unbatched [C, H, W]
        x, grad, indices = x[None], grad[None], np.asarray(indices)[None]
        batched = max_pool2d_with_indices_backward(
            grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices
        )
        return np.asarray(batched[0])
    n, c, h, w = x.shape
    planes = np.arange(n * c).reshape(n, c, 1, 1) * (h * w)
    flat = np.bincount(
        (np.asarray(indices) + planes).ravel(), weights=grad.ravel(), minlength=n * c * h * w
    )
    return flat.astype(grad.dtype).reshape(x.shape)


@simple("aten.avg_pool2d.default")
def avg_pool2d(
    x: np.ndarray,
    kernel_size: Ints,
    stride: Ints = (),
    padding: Ints = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> np.ndarray:
    """Mean over each window [N, C, OH, OW]."""
    x = np.asarray(x)
    k, s, p, d, out = _pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode)
    total = windows(_pad_for(x, k, s, p, d, out, 0), k, s, d, out).sum(axis=(-2, -1))
    mean: np.ndarray = total / _pool_divisor(x, k, s, p, out, count_include_pad, divisor_override)
    return mean.astype(x.dtype)


def _pool_divisor(
    x: np.ndarray, k: _Pair, s: _Pair, p: _Pair, out: _Pair, include_pad: bool, override: int | None
) -> np.ndarray | int:
    if override:
        return override
    ones = np.ones((1, 1, *x.shape[-2:]), dtype=x.dtype)
    counts = windows(_pad_for(ones, k, s, p, (1, 1), out, 0), k, s, (1, 1), out).sum(axis=(-2, -1))
    if include_pad:  # padding counts, the overhang of a ceil_mode window past it does not
        h, w = x.shape[-2:]
        rows = np.minimum(np.arange(out[0]) * s[0] - p[0] + k[0], h + p[0]) - (
            np.arange(out[0]) * s[0] - p[0]
        )
        cols = np.minimum(np.arange(out[1]) * s[1] - p[1] + k[1], w + p[1]) - (
            np.arange(out[1]) * s[1] - p[1]
        )
        return (rows[:, None] * cols[None, :]).astype(x.dtype)
    return counts


@simple("aten.avg_pool2d_backward.default")
def avg_pool2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    kernel_size: Ints,
    stride: Ints,
    padding: Ints,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> np.ndarray:
    """Each output grad spread evenly over its window."""
    x, grad = np.asarray(x), np.asarray(grad)
    k, s, p, d, out = _pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode)
    share = grad / _pool_divisor(x, k, s, p, out, count_include_pad, divisor_override)
    padded = np.zeros(_pad_for(x, k, s, p, d, out, 0).shape, dtype=grad.dtype)
    for a in range(k[0]):
        for b in range(k[1]):
            padded[
                :, :, a : a + s[0] * (out[0] - 1) + 1 : s[0], b : b + s[1] * (out[1] - 1) + 1 : s[1]
            ] += share
    return padded[:, :, p[0] : p[0] + x.shape[2], p[1] : p[1] + x.shape[3]]


@simple("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default")
def adaptive_avg_pool2d(x: np.ndarray, output_size: Sequence[int]) -> np.ndarray:
    """Mean over torch's adaptive bins: bin i spans [floor(i*H/oh), ceil((i+1)*H/oh))."""
    x = np.asarray(x)
    oh, ow = pair(output_size)
    h, w = x.shape[-2:]
    rows = [(i * h // oh, -(-(i + 1) * h // oh)) for i in range(oh)]
    cols = [(j * w // ow, -(-(j + 1) * w // ow)) for j in range(ow)]
    out = np.stack(
        [
            np.stack([x[..., r0:r1, c0:c1].mean(axis=(-2, -1)) for c0, c1 in cols], -1)
            for r0, r1 in rows
        ],
        -2,
    )
    return out.astype(x.dtype)


@simple("aten._adaptive_avg_pool2d_backward.default")
def adaptive_avg_pool2d_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each output grad spread evenly over its adaptive bin."""
    grad, x = np.asarray(grad), np.asarray(x)
    oh, ow = grad.shape[-2:]
    h, w = x.shape[-2:]
    out = np.zeros(x.shape, dtype=grad.dtype)
    for i in range(oh):
        r0, r1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            c0, c1 = j * w // ow, -(-(j + 1) * w // ow)
            out[..., r0:r1, c0:c1] += grad[..., i : i + 1, j : j + 1] / ((r1 - r0) * (c1 - c0))
    return out
