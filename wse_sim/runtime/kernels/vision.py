"""Kernels the vision model zoo needs: hard activations, adaptive max pooling, strided views.
(Transposed convolution, which reuses the ordinary convolution's windows, lives in `conv`.)

Hard activations are elementwise (each PE its own pixels). Adaptive pooling reduces over torch's
adaptive bins.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wse_sim.runtime.kernels.conv import pair
from wse_sim.runtime.kernels.reductions import first_near_max
from wse_sim.runtime.kernels.registry import simple

_THREE = np.float32(3.0)
_SIX = np.float32(6.0)


@simple("aten.hardswish.default")
def hardswish(x: np.ndarray) -> np.ndarray:
    """x * min(max(x + 3, 0), 6) / 6."""
    x = np.asarray(x)
    y: np.ndarray = x * np.minimum(np.maximum(x + _THREE, 0), _SIX) / _SIX
    return y


@simple("aten.hardswish_backward.default")
def hardswish_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    """grad * (0 up to -3, x / 3 + 1/2 inside (-3, 3), 1 from 3 on): torch's branch points."""
    x, grad = np.asarray(x), np.asarray(grad)
    middle = grad * (x / _THREE + np.float32(0.5))
    return np.where(x <= -_THREE, np.zeros((), grad.dtype), np.where(x < _THREE, middle, grad))


@simple("aten.hardsigmoid.default")
def hardsigmoid(x: np.ndarray) -> np.ndarray:
    """min(max(x + 3, 0), 6) / 6."""
    x = np.asarray(x)
    y: np.ndarray = np.minimum(np.maximum(x + _THREE, 0), _SIX) / _SIX
    return y


@simple("aten.hardsigmoid_backward.default")
def hardsigmoid_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    """grad / 6 strictly inside (-3, 3), else 0."""
    x, grad = np.asarray(x), np.asarray(grad)
    inside = (x > -_THREE) & (x < _THREE)
    return np.where(inside, grad / _SIX, np.zeros((), grad.dtype))


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive bins: bin i spans [floor(i*size/out), ceil((i+1)*size/out))."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


@simple("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(x: np.ndarray, output_size: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(max over each adaptive bin, flat H*W index of the max as int64; the first of values
    tied within rounding, as eager)."""
    x = np.asarray(x)
    h, w = x.shape[-2:]
    oh, ow = pair(output_size)
    values = np.empty((*x.shape[:-2], oh, ow), dtype=x.dtype)
    index = np.empty(values.shape, dtype=np.int64)
    for i, (r0, r1) in enumerate(_bins(h, oh)):
        for j, (c0, c1) in enumerate(_bins(w, ow)):
            patch = x[..., r0:r1, c0:c1].reshape(*x.shape[:-2], -1)
            arg = first_near_max(patch, -1)
            values[..., i, j] = np.take_along_axis(patch, arg[..., None], axis=-1)[..., 0]
            index[..., i, j] = (r0 + arg // (c1 - c0)) * w + c0 + arg % (c1 - c0)
    return values, index


@simple("aten.adaptive_max_pool2d_backward.default")
def adaptive_max_pool2d_backward(
    grad: np.ndarray, x: np.ndarray, indices: np.ndarray
) -> np.ndarray:
    """Each output grad added to the input position its bin's max came from."""
    grad, x = np.asarray(grad), np.asarray(x)
    h, w = x.shape[-2:]
    planes = int(np.prod(x.shape[:-2]))
    offsets = (np.arange(planes) * (h * w)).reshape(*x.shape[:-2], 1, 1)
    flat = np.bincount(
        (np.asarray(indices) + offsets).ravel(), weights=grad.ravel(), minlength=planes * h * w
    )
    return flat.astype(grad.dtype).reshape(x.shape)


@simple("aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(
    x: np.ndarray, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> np.ndarray:
    """The elements at storage_offset + sum(i_k * stride_k) of x's row-major storage (tracing
    emits this when a model writes through a view: x is a fresh, contiguous base)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    offset = int(storage_offset or 0)
    item = flat.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], tuple(size), tuple(int(s) * item for s in stride), writeable=False
    )
    return view.copy()


@simple("aten.as_strided_scatter.default")
def as_strided_scatter(
    base: np.ndarray,
    src: np.ndarray,
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int | None = None,
) -> np.ndarray:
    """A copy of `base` with `src` written into its as_strided(size, stride, offset) window."""
    out = np.array(base, copy=True, order="C")
    flat = out.reshape(-1)
    offset = int(storage_offset or 0)
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], tuple(size), tuple(int(s) * flat.itemsize for s in stride)
    )
    view[...] = np.asarray(src, dtype=out.dtype)
    return out
