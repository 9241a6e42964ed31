"""One array namespace over numpy and torch (CPU, or CUDA when a GPU is present).

Engines call only the methods of `Backend`, so the same code runs on both libraries; tests
check that the two agree bit for bit on integer clocks and closely on float data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_NP_DTYPES = {
    "int64": np.int64,
    "int32": np.int32,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
    "float16": np.float16,
    "uint32": np.uint32,
    "int8": np.int8,
}


class Backend:
    """Array functions of one library. `name` is "numpy" or "torch"; arrays are that library's."""

    def __init__(self, name: str = "numpy", device: str | None = None) -> None:
        if name not in ("numpy", "torch"):
            raise ValueError(f"unknown backend {name!r}; use 'numpy' or 'torch'")
        self.name = name
        self.torch: Any = None
        self.device = "cpu"
        if name == "torch":
            import torch

            self.torch = torch
            self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")

    def dtype(self, name: str) -> Any:
        """The library's dtype object for a dtype name such as "int64"."""
        if self.torch is None:
            return _NP_DTYPES[name]
        t = self.torch
        return {
            "int64": t.int64,
            "int32": t.int32,
            "float32": t.float32,
            "float64": t.float64,
            "bool": t.bool,
            "float16": t.float16,
            "int8": t.int8,
            "uint32": t.int32,
        }[name]

    def zeros(self, shape: tuple[int, ...], dtype: str = "int64") -> Any:
        """A zero array of `shape`."""
        if self.torch is None:
            return np.zeros(shape, dtype=_NP_DTYPES[dtype])
        return self.torch.zeros(shape, dtype=self.dtype(dtype), device=self.device)

    def full(self, shape: tuple[int, ...], value: Any, dtype: str = "int64") -> Any:
        """An array of `shape` filled with `value`."""
        if self.torch is None:
            return np.full(shape, value, dtype=_NP_DTYPES[dtype])
        return self.torch.full(shape, value, dtype=self.dtype(dtype), device=self.device)

    def asarray(self, value: Any, dtype: str | None = None) -> Any:
        """Convert numpy data, scalars or this library's arrays to this library's array."""
        if self.torch is None:
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            return np.asarray(value, dtype=_NP_DTYPES[dtype] if dtype else None)
        t = self.torch
        if isinstance(value, t.Tensor):
            out = value.to(self.device)
        else:
            array = np.asarray(value)
            if not array.flags.writeable:  # torch cannot share read-only numpy memory
                array = array.copy()
            out = t.as_tensor(array, device=self.device)
        return out.to(self.dtype(dtype)) if dtype else out

    def to_numpy(self, array: Any) -> np.ndarray:
        """A numpy copy (or view) of an array of either library."""
        if hasattr(array, "detach"):
            host: np.ndarray = array.detach().cpu().numpy()
            return host
        return np.asarray(array)

    def maximum(self, a: Any, b: Any) -> Any:
        """Elementwise maximum; `b` may be a Python scalar."""
        if self.torch is None:
            return np.maximum(a, b)
        if not isinstance(b, self.torch.Tensor):
            return self.torch.clamp(a, min=b)
        return self.torch.maximum(a, b)

    def amax(self, a: Any) -> int:
        """The largest element as a Python int (0 for an empty array)."""
        if a.numel() if self.torch is not None else a.size:
            return int(a.max())
        return 0

    def amin(self, a: Any) -> int:
        """The smallest element as a Python int (0 for an empty array)."""
        if a.numel() if self.torch is not None else a.size:
            return int(a.min())
        return 0

    def total(self, a: Any) -> int:
        """Sum of all elements as a Python int."""
        return int(a.sum())

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """Elementwise select."""
        if self.torch is None:
            return np.where(cond, a, b)
        return self.torch.where(cond, a, b)

    def copy(self, a: Any) -> Any:
        """An independent copy."""
        return a.copy() if self.torch is None else a.clone()

    def any(self, a: Any) -> bool:
        """True when any element is true."""
        return bool(a.any())

    def ceil_div(self, a: Any, b: int) -> Any:
        """Elementwise ceil(a / b) for non-negative integer arrays."""
        return -((-a) // b)

    def max_axis(self, a: Any, axis: int) -> Any:
        """Maximum over one axis (values only)."""
        return a.max(axis=axis) if self.torch is None else a.amax(dim=axis)

    def zeros_like(self, a: Any) -> Any:
        """Zeros with the shape and dtype of `a`."""
        return np.zeros_like(a) if self.torch is None else self.torch.zeros_like(a)

    def rev_cummax(self, a: Any) -> Any:
        """Running maximum from the end of the last axis: out[..., i] = max(a[..., i:])."""
        if self.torch is None:
            return np.maximum.accumulate(a[..., ::-1], axis=-1)[..., ::-1]
        t = self.torch
        return t.flip(t.cummax(t.flip(a, [-1]), dim=-1).values, [-1])

    def swap01(self, a: Any) -> Any:
        """A view with the first two axes swapped (rows <-> cols); writes go to `a`."""
        return a.swapaxes(0, 1) if self.torch is None else a.transpose(0, 1)

    def einsum(self, spec: str, *arrays: Any) -> Any:
        """Einstein summation in this library."""
        return np.einsum(spec, *arrays) if self.torch is None else self.torch.einsum(spec, *arrays)

    def matmul(self, a: Any, b: Any) -> Any:
        """Batched matrix product over the trailing two axes."""
        return a @ b


NUMPY = Backend("numpy")


def get_backend(backend: str | Backend) -> Backend:
    """Return a Backend for "numpy", "torch", or pass an existing Backend through."""
    if isinstance(backend, Backend):
        return backend
    return NUMPY if backend == "numpy" else Backend(backend)
