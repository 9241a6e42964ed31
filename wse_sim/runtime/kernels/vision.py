"""Kernels the vision model zoo needs: hard activations, adaptive max pooling, transposed
convolution.

Hard activations are elementwise (each PE its own pixels). Adaptive pooling reduces over torch's
adaptive bins. A transposed convolution runs as the input-gradient program of the ordinary
convolution with the same filter (scatter of filter taps), and its backward as an ordinary
convolution plus a weight contraction, reusing `conv`'s window views.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wse_sim.runtime.kernels.conv import _ConvGeometry, conv2d_forward, pair, windows
from wse_sim.runtime.kernels.registry import simple

_THREE = np.float32(3.0)
_SIX = np.float32(6.0)


@simple("aten.hardswish.default")
def hardswish(x: Any) -> np.ndarray:
    """x * min(max(x + 3, 0), 6) / 6."""
    x = np.asarray(x)
    y: np.ndarray = x * np.minimum(np.maximum(x + _THREE, 0), _SIX) / _SIX
    return y


@simple("aten.hardswish_backward.default")
def hardswish_backward(grad: Any, x: Any) -> np.ndarray:
    """grad * (0 up to -3, x / 3 + 1/2 inside (-3, 3), 1 from 3 on): torch's branch points."""
    x, grad = np.asarray(x), np.asarray(grad)
    middle = grad * (x / _THREE + np.float32(0.5))
    return np.where(x <= -_THREE, np.zeros((), grad.dtype), np.where(x < _THREE, middle, grad))


@simple("aten.hardsigmoid.default")
def hardsigmoid(x: Any) -> np.ndarray:
    """min(max(x + 3, 0), 6) / 6."""
    x = np.asarray(x)
    y: np.ndarray = np.minimum(np.maximum(x + _THREE, 0), _SIX) / _SIX
    return y


@simple("aten.hardsigmoid_backward.default")
def hardsigmoid_backward(grad: Any, x: Any) -> np.ndarray:
    """grad / 6 strictly inside (-3, 3), else 0."""
    x, grad = np.asarray(x), np.asarray(grad)
    inside = (x > -_THREE) & (x < _THREE)
    return np.where(inside, grad / _SIX, np.zeros((), grad.dtype))


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive bins: bin i spans [floor(i*size/out), ceil((i+1)*size/out))."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


@simple("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(x: Any, output_size: Any) -> tuple[np.ndarray, np.ndarray]:
    """(max over each adaptive bin, flat H*W index of the max as int64; the first on ties)."""
    x = np.asarray(x)
    h, w = x.shape[-2:]
    oh, ow = pair(output_size)
    values = np.empty((*x.shape[:-2], oh, ow), dtype=x.dtype)
    index = np.empty(values.shape, dtype=np.int64)
    for i, (r0, r1) in enumerate(_bins(h, oh)):
        for j, (c0, c1) in enumerate(_bins(w, ow)):
            patch = x[..., r0:r1, c0:c1].reshape(*x.shape[:-2], -1)
            arg = np.argmax(patch, axis=-1)
            values[..., i, j] = np.take_along_axis(patch, arg[..., None], axis=-1)[..., 0]
            index[..., i, j] = (r0 + arg // (c1 - c0)) * w + c0 + arg % (c1 - c0)
    return values, index


@simple("aten.adaptive_max_pool2d_backward.default")
def adaptive_max_pool2d_backward(grad: Any, x: Any, indices: Any) -> np.ndarray:
    """Each output grad added to the input position its bin's max came from."""
    grad, x = np.asarray(grad), np.asarray(x)
    h, w = x.shape[-2:]
    planes = int(np.prod(x.shape[:-2]))
    offsets = (np.arange(planes) * (h * w)).reshape(*x.shape[:-2], 1, 1)
    flat = np.bincount(
        (np.asarray(indices) + offsets).ravel(), weights=grad.ravel(), minlength=planes * h * w
    )
    return flat.astype(grad.dtype).reshape(x.shape)


def transposed_output_hw(
    x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any, output_padding: Any
) -> tuple[int, int]:
    """(H, W) of a transposed convolution's output: (in - 1) * s - 2p + d * (k - 1) + op + 1."""
    s, p, d, op = pair(stride), pair(padding), pair(dilation), pair(output_padding)
    k = w.shape[-2:]
    return tuple(
        (x.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(2)
    )


def conv_transpose2d(
    x: np.ndarray,
    w: np.ndarray,
    stride: Any,
    padding: Any,
    dilation: Any,
    out_pad: Any,
    groups: int,
) -> np.ndarray:
    """x [N, Cin, H, W] with w [Cin, Cout/g, kh, kw] -> [N, Cout, OH, OW] (no bias)."""
    oh, ow = transposed_output_hw(x, w, stride, padding, dilation, out_pad)
    out_shape = (x.shape[0], w.shape[1] * groups, oh, ow)
    geo = _ConvGeometry(np.empty(out_shape, x.dtype), w, stride, padding, dilation, groups)
    return _scatter_taps(x, w, geo, out_shape)


def _scatter_taps(
    grad: np.ndarray, w: np.ndarray, geo: _ConvGeometry, x_shape: tuple[int, ...]
) -> np.ndarray:
    """The input-gradient of conv(x, w) for output grad `grad`: one slice-add per filter tap."""
    (ph, pw), (sh, sw), (dh, dw) = geo.p, geo.s, geo.d
    padded = np.zeros(
        (x_shape[0], x_shape[1], x_shape[2] + 2 * ph, x_shape[3] + 2 * pw), grad.dtype
    )
    g = geo.groups
    cg, og = x_shape[1] // g, w.shape[0] // g
    oh, ow = geo.out
    for i in range(g):
        taps = np.einsum(
            "nopq,ocij->ncijpq", grad[:, i * og : (i + 1) * og], w[i * og : (i + 1) * og]
        )
        target = padded[:, i * cg : (i + 1) * cg]
        for a in range(geo.k[0]):
            for b in range(geo.k[1]):
                rows = slice(a * dh, a * dh + sh * (oh - 1) + 1, sh)
                cols = slice(b * dw, b * dw + sw * (ow - 1) + 1, sw)
                target[:, :, rows, cols] += taps[:, :, a, b]
    return padded[:, :, ph : ph + x_shape[2], pw : pw + x_shape[3]]


def conv_transpose2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(grad_input, grad_weight) of conv_transpose2d for output grad `grad` [N, Cout, OH, OW]."""
    geo = _ConvGeometry(grad, w, stride, padding, dilation, groups)
    grad_x = conv2d_forward(grad, w, geo)  # the transposed op's adjoint is the plain convolution
    cols = windows(geo.padded(grad), geo.k, geo.s, geo.d, geo.out)
    cg, og = grad.shape[1] // groups, w.shape[0] // groups
    grad_w = np.concatenate(
        [
            np.einsum(
                "nopq,ncpqij->ocij",
                x[:, i * og : (i + 1) * og],
                cols[:, i * cg : (i + 1) * cg],
                optimize=True,
            )
            for i in range(groups)
        ],
        axis=0,
    )
    return grad_x, grad_w


@simple("aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(x: Any, size: Any, stride: Any, storage_offset: Any = None) -> np.ndarray:
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
    base: Any, src: Any, size: Any, stride: Any, storage_offset: Any = None
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
