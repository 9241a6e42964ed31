"""Reduction kernels: each PE reduces its tile, then partials meet over row/column trees.

The fabric part (reduce_row / reduce_col of the partials) is charged by the timing plan; the
arithmetic here is numpy's float32 reduction, the same order-insensitive result a tree gives to
within float32 rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from wse_sim.runtime.kernels.registry import Ints, IrDtype, Scalar, numpy_dtype, simple


def _axes(dim: Ints | None, x: np.ndarray | None = None) -> tuple[int, ...] | None:
    """numpy's axis for aten's dim; a 0-d tensor's dim 0 or -1 is the tensor itself, as in torch."""
    if dim is None or dim == [] or (x is not None and np.ndim(x) == 0):
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)


@simple("aten.sum.dim_IntList", "aten.sum.default")
def sum_(
    x: np.ndarray, dim: Ints | None = None, keepdim: bool = False, dtype: IrDtype = None
) -> np.ndarray:
    """Sum over `dim` (all axes when none)."""
    x = np.asarray(x)
    out_dtype = numpy_dtype(dtype, x.dtype if x.dtype != np.bool_ else np.int64)
    return np.sum(x, axis=_axes(dim, x), keepdims=keepdim, dtype=out_dtype)


@simple("aten.mean.dim", "aten.mean.default")
def mean(
    x: np.ndarray, dim: Ints | None = None, keepdim: bool = False, dtype: IrDtype = None
) -> np.ndarray:
    """Mean over `dim` (all axes when none)."""
    x = np.asarray(x)
    return np.mean(x, axis=_axes(dim, x), keepdims=keepdim, dtype=numpy_dtype(dtype, x.dtype))


@simple("aten.amax.default")
def amax(x: np.ndarray, dim: Sequence[int] | None = (), keepdim: bool = False) -> np.ndarray:
    """Maximum over `dim` (all axes when empty)."""
    return np.max(x, axis=_axes(list(dim) if dim is not None else None, x), keepdims=keepdim)


@simple("aten.amin.default")
def amin(x: np.ndarray, dim: Sequence[int] | None = (), keepdim: bool = False) -> np.ndarray:
    """Minimum over `dim` (all axes when empty)."""
    return np.min(x, axis=_axes(list(dim) if dim is not None else None, x), keepdims=keepdim)


# Values within NEAR_TIE_EPS x |the maximum| of the maximum count as tied (a few ulps of the
# compared values themselves): the wafer's arithmetic (another summation order) can move an exact
# tie of eager's by that much, and the first wins, as eager's CPU kernels pick the first of a tie.
# The tolerance is relative to the maximum itself, never to the tensor's largest magnitude: a
# window of values near 1.3 in a tensor that reaches 5 differs by real amounts (1.7e-6 in
# GoogLeNet's pools) that a tensor-wide tolerance called ties, routing the gradient away from
# the maximum eager picks. Exact zeros (ReLU's) reach the wafer exact, so they need no tolerance.
NEAR_TIE_EPS = {np.dtype(np.float32): 2.0**-21, np.dtype(np.float16): 2.0**-9}


def first_near_max(x: np.ndarray, axis: int) -> np.ndarray:
    """Index along `axis` of the first element within a few ulps of the maximum (eager's choice
    on ties, see NEAR_TIE_EPS); a NaN wins as in eager."""
    x = np.asarray(x)
    eps = NEAR_TIE_EPS.get(x.dtype)
    if eps is None or x.size == 0:
        return np.asarray(np.argmax(x, axis=axis))
    top = np.max(x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):  # a NaN or infinite maximum: ties only exactly
        tol = np.where(np.isfinite(top), eps * np.abs(top), 0)
        near = (x >= top - tol) | np.isnan(x)
    return np.asarray(np.argmax(near, axis=axis))


def first_near_min(x: np.ndarray, axis: int) -> np.ndarray:
    """first_near_max of -x."""
    return first_near_max(-np.asarray(x), axis)


_ArgExtreme = Callable[..., np.ndarray]
"""first_near_max or first_near_min: (x, axis) -> the index of the extreme along axis."""


def _extreme_along(
    arg: _ArgExtreme, x: np.ndarray, dim: int, keepdim: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 indices) of first_near_max/min `arg` along `dim`, as aten returns them."""
    x = np.asarray(x)
    if x.ndim == 0:
        return x, np.zeros((), dtype=np.int64)
    idx = np.expand_dims(arg(x, axis=dim), dim)
    values = np.take_along_axis(np.asarray(x), idx, axis=dim)
    if not keepdim:
        idx, values = np.squeeze(idx, dim), np.squeeze(values, dim)
    return values, idx.astype(np.int64)


@simple("aten.max.dim")
def max_dim(x: np.ndarray, dim: int, keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the maximum along `dim`."""
    return _extreme_along(first_near_max, x, dim, keepdim)


@simple("aten.min.dim")
def min_dim(x: np.ndarray, dim: int, keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the minimum along `dim`."""
    return _extreme_along(first_near_min, x, dim, keepdim)


@simple("aten.max.default")
def max_all(x: np.ndarray) -> np.ndarray:
    """The largest element."""
    return np.max(x)


@simple("aten.min.default")
def min_all(x: np.ndarray) -> np.ndarray:
    """The smallest element."""
    return np.min(x)


@simple("aten.argmax.default")
def argmax(x: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
    """Index of the maximum (over the flattened tensor when dim is None; the first of
    near-ties, as eager)."""
    return _arg_extreme(first_near_max, x, dim, keepdim)


@simple("aten.argmin.default")
def argmin(x: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
    """Index of the minimum (over the flattened tensor when dim is None; the first of
    near-ties, as eager)."""
    return _arg_extreme(first_near_min, x, dim, keepdim)


def _arg_extreme(arg: _ArgExtreme, x: np.ndarray, dim: int | None, keepdim: bool) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((), dtype=np.int64)
    if dim is None:
        idx = arg(x.reshape(-1), axis=0)
        return (np.full([1] * x.ndim, idx) if keepdim else np.asarray(idx)).astype(np.int64)
    idx = arg(x, axis=dim)
    return (np.expand_dims(idx, dim) if keepdim else idx).astype(np.int64)


@simple("aten.var.correction", "aten.var.dim")
def var(
    x: np.ndarray,
    dim: Ints | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Scalar | None = None,
) -> np.ndarray:
    """Variance over `dim` with Bessel's correction (torch's default of 1)."""
    ddof: float
    if isinstance(unbiased, bool):
        ddof = 1 if unbiased else 0
    else:
        ddof = 1 if correction is None else correction
    return np.var(x, axis=_axes(dim, x), ddof=ddof, keepdims=keepdim)


@simple("aten.prod.default", "aten.prod.dim_int")
def prod(
    x: np.ndarray, dim: int | None = None, keepdim: bool = False, dtype: IrDtype = None
) -> np.ndarray:
    """Product over `dim` (all elements when none)."""
    return np.prod(x, axis=_axes(dim, x), keepdims=keepdim)


@simple("aten.any.default", "aten.any.dim", "aten.any.dims")
def any_(x: np.ndarray, dim: Ints | None = None, keepdim: bool = False) -> np.ndarray:
    """Whether any element is true."""
    return np.any(x, axis=_axes(dim, x), keepdims=keepdim)


@simple("aten.all.default", "aten.all.dim", "aten.all.dims")
def all_(x: np.ndarray, dim: Ints | None = None, keepdim: bool = False) -> np.ndarray:
    """Whether every element is true."""
    return np.all(x, axis=_axes(dim, x), keepdims=keepdim)
