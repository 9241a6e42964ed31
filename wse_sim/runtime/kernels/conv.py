"""Convolution kernels and their backward form (2-D; 1-D runs as 2-D with a unit height).

A convolution is lowered the way a wafer kernel runs it: every PE gathers its output pixels'
receptive fields (im2col over a strided view, no copy until the contraction) and contracts them
with the filter as a matmul. The backward forms reuse the same windows: the weight gradient is a
matmul of the windows with the output gradient, the input gradient scatters the window gradients
back with one slice-add per filter tap (kh * kw adds, never a per-PE loop). A transposed
convolution runs as that input-gradient program (a scatter of filter taps), and its backward as
an ordinary convolution plus a weight contraction over the same windows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from wse_sim.runtime.kernels.matmul import round_fp16
from wse_sim.runtime.kernels.registry import Ints, KernelImpl, NodeContext, factory, simple


def pair(v: Ints) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def windows(
    xp: np.ndarray,
    k: tuple[int, int],
    s: tuple[int, int],
    d: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """Strided view [N, C, OH, OW, kh, kw] of a padded input xp [N, C, H, W]."""
    n, c = xp.shape[:2]
    sn, sc, sh, sw = xp.strides
    return as_strided(
        xp,
        (n, c, out_hw[0], out_hw[1], k[0], k[1]),
        (sn, sc, sh * s[0], sw * s[1], sh * d[0], sw * d[1]),
        writeable=False,
    )


def out_size(size: int, k: int, s: int, p: int, d: int, ceil: bool = False) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _as_2d(x: np.ndarray) -> tuple[np.ndarray, bool]:
    return (x[:, :, None, :], True) if x.ndim == 3 else (x, False)


class _ConvGeometry:
    """Strides, padding and output size of one convolution node (fixed at load)."""

    def __init__(
        self, x: np.ndarray, w: np.ndarray, stride: Ints, padding: Ints, dilation: Ints, groups: int
    ) -> None:
        one_d = x.ndim == 3
        self.s = (1, pair(stride)[0]) if one_d else pair(stride)
        self.p = (0, pair(padding)[0]) if one_d else pair(padding)
        self.d = (1, pair(dilation)[0]) if one_d else pair(dilation)
        self.k = (w.shape[-2], w.shape[-1]) if w.ndim == 4 else (1, w.shape[-1])
        h, wd = (1, x.shape[-1]) if one_d else x.shape[-2:]
        self.out = (
            out_size(h, self.k[0], self.s[0], self.p[0], self.d[0]),
            out_size(wd, self.k[1], self.s[1], self.p[1], self.d[1]),
        )
        self.groups = groups

    def padded(self, x: np.ndarray) -> np.ndarray:
        (ph, pw) = self.p
        return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x


def conv2d_forward(x: np.ndarray, w: np.ndarray, geo: _ConvGeometry) -> np.ndarray:
    """x [N, C, H, W] * w [O, C/g, kh, kw] -> [N, O, OH, OW]."""
    cols = windows(geo.padded(x), geo.k, geo.s, geo.d, geo.out)
    g = geo.groups
    if g == 1:
        y: np.ndarray = np.einsum("ncpqij,ocij->nopq", cols, w, optimize=True)
        return y
    # All groups in one contraction (depthwise layers have hundreds): [N, g, C/g, ...] x [g, O/g, ...]
    n, c, oh, ow, kh, kw = cols.shape
    grouped = cols.reshape(n, g, c // g, oh, ow, kh, kw)
    wg = w.reshape(g, w.shape[0] // g, *w.shape[1:])
    out: np.ndarray = np.einsum("ngcpqij,gocij->ngopq", grouped, wg, optimize=True)
    return out.reshape(n, w.shape[0], oh, ow)


def conv2d_backward(
    grad: np.ndarray, x: np.ndarray, w: np.ndarray, geo: _ConvGeometry
) -> tuple[np.ndarray, np.ndarray]:
    """(grad_input [N, C, H, W], grad_weight [O, C/g, kh, kw]) for output grad [N, O, OH, OW]."""
    xp = geo.padded(x)
    cols = windows(xp, geo.k, geo.s, geo.d, geo.out)
    g = geo.groups
    n, c, oh, ow, kh, kw = cols.shape
    grouped = cols.reshape(n, g, c // g, oh, ow, kh, kw)
    grad_g = grad.reshape(n, g, w.shape[0] // g, oh, ow)
    wg = w.reshape(g, w.shape[0] // g, *w.shape[1:])
    grad_w = np.einsum("ngopq,ngcpqij->gocij", grad_g, grouped, optimize=True).reshape(w.shape)
    taps = np.einsum("ngopq,gocij->ngcijpq", grad_g, wg, optimize=True).reshape(
        n, c, kh, kw, oh, ow
    )
    grad_xp = np.zeros(xp.shape, dtype=grad.dtype)
    (sh, sw), (dh, dw) = geo.s, geo.d
    for a in range(kh):
        for b in range(kw):
            grad_xp[
                :,
                :,
                a * dh : a * dh + sh * (oh - 1) + 1 : sh,
                b * dw : b * dw + sw * (ow - 1) + 1 : sw,
            ] += taps[:, :, a, b]
    (ph, pw) = geo.p
    grad_x = grad_xp[:, :, ph : xp.shape[2] - ph, pw : xp.shape[3] - pw]
    return grad_x, grad_w


@factory("aten.convolution.default")
def convolution(ctx: NodeContext) -> KernelImpl:
    """convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)."""

    def impl(
        x: np.ndarray,
        w: np.ndarray,
        bias: np.ndarray | None,
        stride: Ints,
        padding: Ints,
        dilation: Ints,
        transposed: bool,
        output_padding: Ints,
        groups: int,
    ) -> np.ndarray:
        x, w = np.asarray(x), np.asarray(w)
        if transposed:
            return _transposed(x, w, bias, stride, padding, dilation, output_padding, groups)
        geo = _ConvGeometry(x, w, stride, padding, dilation, groups)
        x2, one_d = _as_2d(x)
        w2, _ = _as_2d(w)
        if ctx.fp16:
            x2, w2 = round_fp16(x2), round_fp16(w2)
        out = conv2d_forward(x2, w2, geo)
        if ctx.fp16:
            out = round_fp16(out)
        if bias is not None:
            out = out + np.asarray(bias)[None, :, None, None]
        return out[:, :, 0, :] if one_d else out

    return impl


@simple("aten.convolution_backward.default")
def convolution_backward(
    grad: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    bias_sizes: Sequence[int] | None,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    transposed: bool,
    output_padding: Ints,
    groups: int,
    output_mask: list[bool],
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(grad_input, grad_weight, grad_bias) of `convolution` (None where output_mask is false)."""
    grad, x, w = np.asarray(grad), np.asarray(x), np.asarray(w)
    g2, one_d = _as_2d(grad)
    if transposed:
        s2, p2, d2 = _lift(stride, one_d, 1), _lift(padding, one_d, 0), _lift(dilation, one_d, 1)
        grad_x, grad_w = conv_transpose2d_backward(
            g2, _as_2d(x)[0], _as_2d(w)[0], s2, p2, d2, groups
        )
    else:
        geo = _ConvGeometry(x, w, stride, padding, dilation, groups)
        grad_x, grad_w = conv2d_backward(g2, _as_2d(x)[0], _as_2d(w)[0], geo)
    if one_d:
        grad_x, grad_w = grad_x[:, :, 0, :], grad_w[:, :, 0, :]
    grad_b = grad.sum(axis=tuple(i for i in range(grad.ndim) if i != 1)) if output_mask[2] else None
    return (grad_x if output_mask[0] else None), (grad_w if output_mask[1] else None), grad_b


def _lift(v: Ints, one_d: bool, unit: int) -> tuple[int, int]:
    """A 1-D convolution's stride/padding/dilation as the 2-D pair with a unit height."""
    return (unit, pair(v)[0]) if one_d else pair(v)


def _transposed(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    output_padding: Ints,
    groups: int,
) -> np.ndarray:
    """A transposed convolution (1-D runs as 2-D with a unit height), plus its bias."""
    x2, one_d = _as_2d(x)
    out = conv_transpose2d(
        x2,
        _as_2d(w)[0],
        _lift(stride, one_d, 1),
        _lift(padding, one_d, 0),
        _lift(dilation, one_d, 1),
        _lift(output_padding, one_d, 0),
        groups,
    )
    if bias is not None:
        out = out + np.asarray(bias)[None, :, None, None]
    return out[:, :, 0, :] if one_d else out


def transposed_output_hw(
    x: np.ndarray, w: np.ndarray, stride: Ints, padding: Ints, dilation: Ints, output_padding: Ints
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
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    out_pad: Ints,
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
    stride: Ints,
    padding: Ints,
    dilation: Ints,
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
