"""Kernels the transformer zoo needs: prefix sums for position and mask construction.

A prefix sum along the axis a PE row holds runs as a local scan of each PE's tile followed by a
carry passed east along the row (one word per row per hop); the timing plan charges it as a row
reduction. Integer inputs accumulate in int64 as torch does.
"""

from __future__ import annotations

import numpy as np

from wse_sim.runtime.kernels.registry import IrDtype, numpy_dtype, simple


@simple("aten.cumsum.default")
def cumsum(x: np.ndarray, dim: int, dtype: IrDtype = None) -> np.ndarray:
    """Running sum of x along `dim`; bool/int inputs sum in int64 (torch's promotion)."""
    x = np.asarray(x)
    default = np.int64 if x.dtype.kind in "biu" else x.dtype
    if x.ndim == 0:  # dim 0 / -1 of a 0-d tensor: the value itself
        return np.asarray(x, dtype=numpy_dtype(dtype, default))
    return np.cumsum(x, axis=dim, dtype=numpy_dtype(dtype, default))
