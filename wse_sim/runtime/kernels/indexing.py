"""Gather/scatter kernels (index arithmetic stays on the PE holding the tile)."""

from __future__ import annotations

import numpy as np

from wse_sim.runtime.kernels.registry import Operand, simple


def _along(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    """Full advanced-index tuple addressing x[..., index, ...] along `dim` for every element."""
    grids: list[np.ndarray] = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


@simple("aten.gather.default")
def gather(x: np.ndarray, dim: int, index: np.ndarray, sparse_grad: bool = False) -> np.ndarray:
    """out[i][j] = x[i][index[i][j]] along `dim` (a 0-d x or an empty index as in torch)."""
    x, index = np.asarray(x), np.asarray(index)
    if index.size == 0:
        return np.empty(index.shape, dtype=x.dtype)
    if x.ndim == 0:
        return np.full(index.shape, x, dtype=x.dtype)
    return np.take_along_axis(x, index, axis=dim)


@simple("aten.scatter.value", "aten.scatter.src")
def scatter(x: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """A copy of x with out[index along dim] = src (a scalar or a tensor)."""
    out = np.array(x, copy=True)
    index = np.asarray(index)
    if out.ndim == 0 or index.size == 0:  # a 0-d x takes src's (first) value; nothing to write
        if index.size == 0:
            return out
        return np.array(np.asarray(src).reshape(-1)[0], dtype=out.dtype)
    values = src if np.ndim(src) == 0 else np.asarray(src)[tuple(slice(0, n) for n in index.shape)]
    out[_along(index, dim % out.ndim)] = values
    return out


@simple("aten.scatter_add.default")
def scatter_add(x: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """A copy of x with src added at index along dim (repeated indices accumulate)."""
    out = np.array(x, copy=True)
    index = np.asarray(index)
    if index.size == 0:
        return out
    if out.ndim == 0:
        return np.array(out + np.asarray(src).reshape(-1)[: index.size].sum(), dtype=out.dtype)
    values = np.asarray(src)[tuple(slice(0, n) for n in index.shape)]
    np.add.at(out, _along(index, dim % out.ndim), values)
    return out


@simple("aten.index_select.default")
def index_select(x: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    """x's slices at `index` along `dim` (a 0-d x stays 0-d, as in torch)."""
    if np.ndim(x) == 0:
        return np.array(x, copy=True)
    out: np.ndarray = np.take(x, index, axis=dim)
    return out


def _index_tuple(indices: list[np.ndarray | None]) -> tuple[np.ndarray | slice, ...]:
    return tuple(slice(None) if i is None else np.asarray(i) for i in indices)


@simple("aten.index.Tensor")
def index(x: np.ndarray, indices: list[np.ndarray | None]) -> np.ndarray:
    """x[indices] with torch/numpy advanced-indexing semantics (None keeps an axis)."""
    out: np.ndarray = np.asarray(x)[_index_tuple(indices)]
    return out


@simple("aten.index_put.default", "aten._unsafe_index_put.default")
def index_put(
    x: np.ndarray, indices: list[np.ndarray | None], values: np.ndarray, accumulate: bool = False
) -> np.ndarray:
    """A copy of x with x[indices] = values (or += with accumulate)."""
    out = np.array(x, copy=True)
    where = _index_tuple(indices)
    if accumulate:
        np.add.at(out, where, values)  # type: ignore[arg-type]  # numpy's stubs: no tuple index
    else:
        out[where] = values
    return out


@simple("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(x: np.ndarray, mask: np.ndarray, value: Operand) -> np.ndarray:
    """x with `value` where mask is true."""
    x = np.asarray(x)
    return np.where(mask, np.asarray(value, dtype=x.dtype), x)


@simple("aten.slice_scatter.default")
def slice_scatter(
    x: np.ndarray,
    src: np.ndarray,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> np.ndarray:
    """A copy of x with x[start:end:step] along dim replaced by src."""
    out = np.array(x, copy=True)
    where = [slice(None)] * out.ndim
    where[dim % out.ndim] = slice(start, end, step)
    out[tuple(where)] = src
    return out


@simple("aten.select_scatter.default")
def select_scatter(x: np.ndarray, src: np.ndarray, dim: int, index: int) -> np.ndarray:
    """A copy of x with x[index] along dim replaced by src."""
    out = np.array(x, copy=True)
    where: list[slice | int] = [slice(None)] * out.ndim
    where[dim % out.ndim] = index
    out[tuple(where)] = src
    return out
