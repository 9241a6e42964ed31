"""Kernels of Core ATen ops beyond the families: the backward forms of resampling and padding,
running products and diagonal writes.

Resampling and replication padding along one axis are linear maps with a small (out x in) matrix
per axis; on the wafer each PE row applies the row matrix to its tile and each column the column
matrix (two local matmuls, the values already where the PEs hold them). The backward applies the
transposed matrices. The matrices follow ATen's index arithmetic in float32 (area_pixel scales,
nearest's floor, align_corners).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wse_sim.runtime.kernels.registry import IrDtype, numpy_dtype, simple


def _scale(size_in: int, size_out: int, align_corners: bool, scale: float | None) -> np.float32:
    if align_corners:
        return np.float32((size_in - 1) / (size_out - 1) if size_out > 1 else 0.0)
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(size_in / size_out)


def nearest_matrix(size_in: int, size_out: int, scale: float | None) -> np.ndarray:
    """(size_out, size_in) one-hot rows: output i reads input min(floor(i * scale), in - 1)."""
    step = _scale(size_in, size_out, False, scale)
    src = np.minimum(np.floor(np.arange(size_out, dtype=np.float32) * step), size_in - 1)
    matrix = np.zeros((size_out, size_in), dtype=np.float32)
    matrix[np.arange(size_out), src.astype(np.int64)] = 1
    return matrix


def linear_matrix(
    size_in: int, size_out: int, align_corners: bool, scale: float | None
) -> np.ndarray:
    """(size_out, size_in) weights of linear interpolation along one axis (ATen's formula)."""
    step = _scale(size_in, size_out, align_corners, scale)
    dst = np.arange(size_out, dtype=np.float32)
    src = dst * step if align_corners else np.maximum(step * (dst + 0.5) - 0.5, 0)
    low = np.floor(src).astype(np.int64)
    low = np.minimum(low, size_in - 1)
    high = low + (low < size_in - 1)
    frac = (src - low).astype(np.float32)
    matrix = np.zeros((size_out, size_in), dtype=np.float32)
    np.add.at(matrix, (np.arange(size_out), low), 1 - frac)
    np.add.at(matrix, (np.arange(size_out), high), frac)
    return matrix


def _apply_back(grad: np.ndarray, rows: np.ndarray, cols: np.ndarray | None) -> np.ndarray:
    """grad (..., out_h, out_w) -> (..., in_h, in_w) through the transposed axis matrices."""
    g = np.asarray(grad, dtype=np.float32)
    if cols is None:  # 1-D: the last axis only
        return np.asarray(g @ rows, dtype=np.float32)
    return np.asarray(np.swapaxes(rows, 0, 1) @ g @ cols, dtype=np.float32)


@simple("aten.upsample_nearest2d_backward.default")
def upsample_nearest2d_backward(
    grad: np.ndarray,
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> np.ndarray:
    """Each input pixel gets the sum of the gradients of the output pixels that copied it."""
    (oh, ow), (ih, iw) = output_size, input_size[-2:]
    return _apply_back(grad, nearest_matrix(ih, oh, scales_h), nearest_matrix(iw, ow, scales_w))


@simple("aten.upsample_nearest1d_backward.default")
def upsample_nearest1d_backward(
    grad: np.ndarray,
    output_size: Sequence[int],
    input_size: Sequence[int],
    scales: float | None = None,
) -> np.ndarray:
    """upsample_nearest2d_backward along the last axis only."""
    return _apply_back(grad, nearest_matrix(input_size[-1], output_size[0], scales), None)


@simple("aten.upsample_bilinear2d_backward.default")
def upsample_bilinear2d_backward(
    grad: np.ndarray,
    output_size: Sequence[int],
    input_size: Sequence[int],
    align_corners: bool,
    scales_h: float | None = None,
    scales_w: float | None = None,
) -> np.ndarray:
    """The transposed interpolation: each output gradient goes to its four source pixels."""
    (oh, ow), (ih, iw) = output_size, input_size[-2:]
    rows = linear_matrix(ih, oh, align_corners, scales_h)
    return _apply_back(grad, rows, linear_matrix(iw, ow, align_corners, scales_w))


def _replicate_matrix(size_in: int, before: int, after: int) -> np.ndarray:
    size_out = size_in + before + after
    src = np.clip(np.arange(size_out) - before, 0, size_in - 1)
    matrix = np.zeros((size_out, size_in), dtype=np.float32)
    matrix[np.arange(size_out), src] = 1
    return matrix


@simple("aten.replication_pad2d_backward.default")
def replication_pad2d_backward(
    grad: np.ndarray, x: np.ndarray, padding: Sequence[int]
) -> np.ndarray:
    """Edge pixels collect the gradients of their replicas; padding = [left, right, top, bottom]."""
    left, right, top, bottom = padding
    h, w = np.shape(x)[-2:]
    rows, cols = _replicate_matrix(h, top, bottom), _replicate_matrix(w, left, right)
    return _apply_back(grad, rows, cols).astype(np.asarray(x).dtype, copy=False)


@simple("aten.cumprod.default")
def cumprod(x: np.ndarray, dim: int, dtype: IrDtype = None) -> np.ndarray:
    """Running product along `dim` (a row scan, like cumsum); integers multiply in int64."""
    x = np.asarray(x)
    default = np.int64 if x.dtype.kind in "biu" else x.dtype
    return np.cumprod(x, axis=dim, dtype=numpy_dtype(dtype, default))


@simple("aten.diagonal_scatter.default")
def diagonal_scatter(
    x: np.ndarray, src: np.ndarray, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> np.ndarray:
    """A copy of x with its (offset, dim1, dim2) diagonal replaced by src (diagonal's backward)."""
    out = np.array(x, copy=True)
    moved = np.moveaxis(out, (dim1, dim2), (-2, -1))  # a view: writes land in out
    count = np.shape(src)[-1]
    rows = np.arange(count) + max(-offset, 0)
    cols = np.arange(count) + max(offset, 0)
    moved[..., rows, cols] = src
    return out


@simple("aten.round.decimals")
def round_decimals(x: np.ndarray, decimals: int = 0) -> np.ndarray:
    """x rounded half-to-even at 10**-decimals (torch scales, rounds and scales back)."""
    return np.round(x, decimals)
