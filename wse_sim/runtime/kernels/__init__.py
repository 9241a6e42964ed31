"""The runtime's kernel library: one numpy kernel per op of `compiler.ops.SUPPORTED_OPS`.

Importing this package registers every kernel in `KERNELS` (target string -> factory).
Kernels never import torch; float32 is computed in float32, fp16 artifacts round matmul and
convolution operands and products to float16 (bfloat16 is computed in float32).
"""

from __future__ import annotations

from wse_sim.runtime.kernels import (  # noqa: F401  (each module registers its kernels)
    conv,
    core,  # core ATen ops beyond the families (resampling backward, cumprod...)
    elementwise,
    grid_sample,  # grid_sampler_2d's backward
    indexing,
    matmul,
    nn,
    norm,
    pool,
    reductions,
    shape,
    text,  # the transformer zoo's kernels
    vision,
)
from wse_sim.runtime.kernels.registry import (
    KERNELS,
    NodeContext,
    UnsupportedKernelError,
    kernel_factory,
    numpy_dtype,
)

__all__ = ["KERNELS", "NodeContext", "UnsupportedKernelError", "kernel_factory", "numpy_dtype"]
