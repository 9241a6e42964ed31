"""Layout kernels: views, copies, concatenation and constant tensors.

On the wafer a reshape or transpose of a tile is a change of the memory descriptor, not of the
data, so these kernels cost nothing but the transfer to the consumer (charged by the timing
plan). Tensors are never written in place anywhere in the runtime, so views are safe to return.
Creation ops (full, zeros, arange...) produce constants: they are computed on the first step and
reused, as the compiled program would keep them in SRAM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from wse_sim.runtime.kernels.registry import (
    Ints,
    IrDtype,
    KernelFactory,
    KernelImpl,
    NodeContext,
    factory,
    numpy_dtype,
    simple,
)


def _dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


@simple(
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.reshape.default",
    "aten.view_copy.default",
)
def view(x: np.ndarray, size: list[int]) -> np.ndarray:
    """x with a new shape (-1 inferred)."""
    return np.reshape(x, size)


@simple("aten.expand.default", "aten.expand_copy.default")
def expand(x: np.ndarray, size: list[int], implicit: bool = False) -> np.ndarray:
    """x broadcast to `size` (-1 keeps a dimension)."""
    x = np.asarray(x)
    lead = len(size) - x.ndim
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return np.broadcast_to(x, shape)


@simple("aten.permute.default", "aten.permute_copy.default")
def permute(x: np.ndarray, dims: list[int]) -> np.ndarray:
    """x with its axes reordered."""
    return np.transpose(x, dims)


@simple("aten.transpose.int", "aten.transpose_copy.int")
def transpose(x: np.ndarray, d0: int, d1: int) -> np.ndarray:
    """x with two axes swapped."""
    return np.swapaxes(x, d0, d1)


@simple("aten.t.default")
def t(x: np.ndarray) -> np.ndarray:
    """The transpose of a matrix (a vector unchanged)."""
    return np.transpose(x)


@simple(
    "aten.clone.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.lift_fresh_copy.default",
    "aten.contiguous.default",
    "aten.alias_copy.default",
    "aten.detach_copy.default",
)
def identity(x: np.ndarray, *_: object, **__: object) -> np.ndarray:
    """x itself (tensors are immutable in the runtime)."""
    return x


@simple("aten._to_copy.default", "aten.to.dtype", "aten.type_as.default")
def to_copy(x: np.ndarray, dtype: IrDtype = None, **_: object) -> np.ndarray:
    """x converted to `dtype` (device/layout arguments mean nothing on the wafer)."""
    if dtype is None or not isinstance(dtype, str | dict):
        return x
    return np.asarray(x).astype(numpy_dtype(dtype), copy=False)


@simple("aten.copy.default")
def copy(dst: np.ndarray, src: np.ndarray, non_blocking: bool = False) -> np.ndarray:
    """src broadcast into dst's shape and dtype."""
    dst = np.asarray(dst)
    return np.broadcast_to(np.asarray(src).astype(dst.dtype, copy=False), dst.shape)


@simple("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(
    x: np.ndarray, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> np.ndarray:
    """x[start:end:step] along `dim`."""
    x = np.asarray(x)
    index = [slice(None)] * x.ndim
    index[_dim(dim, x.ndim)] = slice(start, end, step)
    out: np.ndarray = x[tuple(index)]
    return out


@simple("aten.select.int", "aten.select_copy.int")
def select(x: np.ndarray, dim: int, index: int) -> np.ndarray:
    """x[index] along `dim` (that axis removed)."""
    out: np.ndarray = np.take(x, index, axis=dim)
    return out


@simple("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.squeeze_copy.dims")
def squeeze(x: np.ndarray, dims: Ints | None = None) -> np.ndarray:
    """x without the given size-1 axes (all size-1 axes when none given)."""
    a = np.asarray(x)
    if dims is None:
        return np.squeeze(a)
    dims = [dims] if isinstance(dims, int) else dims
    if a.ndim == 0:  # torch accepts dim 0 / -1 of a 0-d tensor
        return a
    keep = tuple(_dim(d, a.ndim) for d in dims if a.shape[d] == 1)
    return np.squeeze(a, axis=keep) if keep else a


@simple("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(x: np.ndarray, dim: int) -> np.ndarray:
    """x with a new size-1 axis at `dim`."""
    x = np.asarray(x)
    return np.expand_dims(x, dim if dim >= 0 else dim + x.ndim + 1)


@simple("aten.cat.default", "aten.concat.default")
def cat(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    """The tensors joined along `dim`; as in torch, a 1-d empty tensor joins anything (it is
    skipped)."""
    arrays = [np.asarray(t) for t in tensors]
    kept = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)]
    if not kept:
        return arrays[0]
    return np.concatenate(kept, axis=dim)


@simple("aten.stack.default")
def stack(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    """The tensors stacked along a new axis `dim`."""
    return np.stack(tensors, axis=dim)


@simple("aten.split.Tensor", "aten.split_copy.Tensor")
def split(x: np.ndarray, split_size: int, dim: int = 0) -> list[np.ndarray]:
    """Chunks of `split_size` along `dim` (the last may be smaller)."""
    n = np.shape(x)[dim]
    return np.split(x, list(range(split_size, n, split_size)), axis=dim)


@simple("aten.split_with_sizes.default", "aten.split_with_sizes_copy.default")
def split_with_sizes(x: np.ndarray, split_sizes: list[int], dim: int = 0) -> list[np.ndarray]:
    """Chunks of the given sizes along `dim`."""
    return np.split(x, np.cumsum(split_sizes)[:-1].tolist(), axis=dim)


@simple("aten.unbind.int", "aten.unbind_copy.int")
def unbind(x: np.ndarray, dim: int = 0) -> list[np.ndarray]:
    """The slices of x along `dim`."""
    return [np.take(x, i, axis=dim) for i in range(np.shape(x)[dim])]


@simple("aten.flip.default")
def flip(x: np.ndarray, dims: list[int]) -> np.ndarray:
    """x reversed along `dims`."""
    return np.flip(x, axis=tuple(dims))


@simple("aten.roll.default")
def roll(x: np.ndarray, shifts: list[int], dims: list[int] | None = None) -> np.ndarray:
    """x rotated by `shifts` along `dims` (a tensor rotation, not a fabric torus)."""
    return np.roll(x, shifts, axis=tuple(dims) if dims else None)


@simple("aten.repeat.default")
def repeat(x: np.ndarray, repeats: list[int]) -> np.ndarray:
    """x tiled `repeats` times per axis."""
    return np.tile(x, repeats)


@simple("aten.tril.default")
def tril(x: np.ndarray, diagonal: int = 0) -> np.ndarray:
    """The lower triangle of the last two axes."""
    return np.tril(x, diagonal)


@simple("aten.triu.default")
def triu(x: np.ndarray, diagonal: int = 0) -> np.ndarray:
    """The upper triangle of the last two axes."""
    return np.triu(x, diagonal)


@simple("getitem", "<built-in function getitem>", "_operator.getitem")
def getitem(values: Sequence[object], index: int) -> object:
    """One output of a tuple-valued node."""
    return values[index]


@simple("aten.constant_pad_nd.default")
def constant_pad_nd(x: np.ndarray, pad: list[int], value: float = 0) -> np.ndarray:
    """x padded (negative pads crop) on trailing axes, pad = [last_lo, last_hi, prev_lo, ...]."""
    x = np.asarray(x)
    widths = [(0, 0)] * x.ndim
    crops = [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        widths[axis] = (max(lo, 0), max(hi, 0))
        crops[axis] = slice(-min(lo, 0), x.shape[axis] + min(hi, 0))
    return np.pad(x[tuple(crops)], widths, constant_values=value)


def _constant(ctx: NodeContext, make: Callable[..., object]) -> KernelImpl:
    """A closure that computes a constant on its first call and returns it after that."""
    cache: list[np.ndarray] = []

    def impl(*args: object, **kwargs: object) -> np.ndarray:
        if not cache:
            cache.append(np.asarray(make(*args, **kwargs), dtype=numpy_dtype(ctx.dtype)))
        return cache[0]

    return impl


_FillValue = Callable[[tuple[object, ...], dict[str, object]], object]
"""A full/zeros/ones node's fill value from its (args, kwargs)."""


def _filled(value_of: _FillValue) -> KernelFactory:
    def make(ctx: NodeContext) -> KernelImpl:
        return _constant(ctx, lambda *a, **k: np.full(ctx.shape or (), value_of(a, k)))

    return make


factory("aten.full.default", "aten.new_full.default", "aten.full_like.default")(
    _filled(lambda a, k: a[1] if len(a) > 1 else k["fill_value"])
)
factory(
    "aten.zeros.default",
    "aten.zeros_like.default",
    "aten.new_zeros.default",
    "aten.empty.memory_format",
    "aten.empty_like.default",
    "aten.new_empty.default",
    "aten.empty_strided.default",
)(_filled(lambda a, k: 0))
factory("aten.ones.default", "aten.ones_like.default", "aten.new_ones.default")(
    _filled(lambda a, k: 1)
)
factory("aten.scalar_tensor.default")(_filled(lambda a, k: a[0]))


@factory("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(ctx: NodeContext) -> KernelImpl:
    """0..end, start..end or start..end by step, in the node's dtype."""

    def make(*args: object, **kwargs: object) -> np.ndarray:
        bounds = [a for a in args if isinstance(a, int | float)]
        step = kwargs.get("step")
        if isinstance(step, int | float):  # a Scalar in ATen's schema: always a number
            bounds.append(step)
        return np.arange(*bounds)

    return _constant(ctx, make)
