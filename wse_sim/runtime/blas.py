"""Keep numpy's BLAS single-threaded while jobs run.

A step's matrices are small and a wafer worker runs several jobs at once on a few shared cores:
OpenBLAS's worker threads then spin against each other and slowed a 64-sample MLP step about
3x in our measurements. numpy exposes no API for this, so the setter of the OpenBLAS build that
numpy loaded is called through ctypes; on any other BLAS this is a no-op.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_done: dict[int, bool] = {}


def limit_blas_threads(threads: int = 1) -> bool:
    """Set numpy's OpenBLAS thread count (once per value); returns whether a setter was found."""
    if threads in _done:
        return _done[threads]
    found = False
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs_dir, "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                found = True
                break
    _done[threads] = found
    return found
