"""PyTorch's Core ATen opset on the wafer: which core ops run as kernels, which SAM decomposes
further, and which it refuses (with the reason).

Every other ATen op decomposes to the core opset (`torch._decomp.core_aten_decompositions`), so a
front end that covers the core opset takes any model. The core opset is the set of overloads
tagged `torch.Tag.core` (160 operator names in torch 2.14). For each core op SAM either has a
wafer kernel (`compiler.ops.SUPPORTED_OPS`), decomposes it into ops that have one
(`CORE_DECOMPOSED`, with torch._decomp's own decompositions), or refuses it with a reason a user
can act on (`REFUSED`). `benchmarks/op_coverage.py` measures the three against eager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Core ops with an elementwise or reduction wafer kernel (wse_sim/runtime/kernels) that the
# families of compiler.ops do not list.
CORE_KERNEL_OPS = frozenset(
    {
        "aten.fmod.Scalar",
        "aten.fmod.Tensor",
        "aten.atan2.default",
        "aten.acos.default",
        "aten.asin.default",
        "aten.atan.default",
        "aten.acosh.default",
        "aten.asinh.default",
        "aten.atanh.default",
        "aten.sinh.default",
        "aten.cosh.default",
        "aten.tan.default",
        "aten.log10.default",
        "aten.bitwise_and.Scalar",
        "aten.bitwise_or.Scalar",
        "aten.bitwise_xor.Scalar",
        "aten.clamp.Tensor",
        "aten.div.Scalar_mode",
        "aten.var.dim",
        "aten.prod.dim_int",
        "aten.max.default",
        "aten.min.default",
        "aten.round.decimals",
        # backward forms and helpers of core ops (wse_sim/runtime/kernels/core.py)
        "aten.upsample_nearest1d_backward.default",
        "aten.upsample_nearest2d_backward.default",
        "aten.upsample_bilinear2d_backward.default",
        "aten.replication_pad2d_backward.default",
        "aten.cumprod.default",
        "aten.diagonal_scatter.default",
        "aten.grid_sampler_2d_backward.default",  # (wse_sim/runtime/kernels/grid_sample.py)
    }
)

# Core (and backend) ops that the front end decomposes with torch._decomp's decompositions into
# ops with wafer kernels, so the lowering never sees them (aten packet names).
CORE_DECOMPOSED = (
    "native_group_norm",
    "native_group_norm_backward",
    "new_empty_strided",
    "elu",
    "elu_backward",
    "diagonal",
    "fill",
    "upsample_nearest2d",
    "upsample_bilinear2d",
    "reflection_pad1d",
    "reflection_pad2d",
    "replication_pad2d",
    "col2im",
    "grid_sampler_2d",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
)

_SHAPE_QUERY = (
    "a Python-level size query: it never reaches the wafer when shapes are static "
    "(make_fx specialises them); keep tensor shapes independent of tensor values"
)
_DATA_DEPENDENT = (
    "the output's shape depends on tensor values, and a wafer program has static shapes; "
    "use a mask (torch.where(cond, x, 0)) or do it on the host in make_batch"
)
_RANDOM = (
    "random numbers drawn on the wafer come from the runtime's own (seed, step) stream "
    "(dropout, bernoulli); draw other random tensors on the host in make_batch"
)

# Core ops that make no sense on the wafer (or need a kernel SAM does not have), with the reason
# a refused job's error gives, as 'why; what to write instead' (the alternative is offered only
# when the call is on the user's own line: compiler.opcheck).
REFUSED: dict[str, str] = {
    "aten.sym_size.int": _SHAPE_QUERY,
    "aten.sym_numel.default": _SHAPE_QUERY,
    "aten.sym_stride.int": _SHAPE_QUERY,
    "aten.sym_storage_offset.default": _SHAPE_QUERY,
    "aten.sym_is_contiguous.default": _SHAPE_QUERY,
    "aten.resize_.default": (
        "resizing a tensor in place gives it a new shape while the step runs, and a wafer program "
        "has static shapes; build a tensor of the new shape instead (x.new_zeros(shape), reshape)"
    ),
    "aten._local_scalar_dense.default": (
        "a .item()/bool(tensor) call makes control flow data-dependent; keep values as tensors "
        "(torch.where)"
    ),
    "aten.nonzero.default": _DATA_DEPENDENT,
    "aten.masked_scatter.default": _DATA_DEPENDENT,
    "aten.rand.default": _RANDOM,
    "aten.randn.default": _RANDOM,
    "aten.randperm.default": _RANDOM,
    "aten._fft_r2c.default": (
        "FFTs produce complex tensors and the wafer computes in real fp16/fp32; use a real DFT "
        "as a matmul with a cos/sin basis (torch.cos/torch.sin of an outer product)"
    ),
    "aten._fft_c2r.default": "complex tensors have no wafer representation (see _fft_r2c)",
    "aten.sort.default": (
        "sorting has no wafer kernel; sort on the host in make_batch, or use a softmax weighting "
        "instead of an order"
    ),
    "aten.topk.default": (
        "top-k selection has no wafer kernel; use a softmax or max reduction (amax) instead"
    ),
    "aten._cdist_forward.default": (
        "pairwise distances have no wafer kernel; write them as matmuls: "
        "(x*x).sum(-1)[:, None] - 2 * x @ y.T + (y*y).sum(-1)[None]"
    ),
    "aten._pdist_forward.default": (
        "pairwise distances have no wafer kernel; write them as matmuls (see _cdist_forward)"
    ),
    "aten._embedding_bag.default": (
        "embedding bags have no wafer kernel; use nn.Embedding and a sum or mean over the bag"
    ),
    "aten.scatter_reduce.two": (
        "scatter with a reduction has no wafer kernel; use scatter_add (index_add) for sums"
    ),
    "aten.avg_pool3d.default": "3-D pooling has no wafer kernel; pool 2-D slices",
    "aten.max_pool3d_with_indices.default": "3-D pooling has no wafer kernel; pool 2-D slices",
    "aten._adaptive_avg_pool3d.default": "3-D pooling has no wafer kernel; pool 2-D slices",
    "aten.reflection_pad3d.default": "3-D padding has no wafer kernel; pad 2-D slices",
    "aten.replication_pad3d.default": "3-D padding has no wafer kernel; pad 2-D slices",
}


def core_op_names() -> list[str]:
    """Every ATen overload tagged torch.Tag.core in this torch, sorted ('aten.add.Tensor', ...).

    Read from the dispatcher's registry: `torch.ops.aten` lists only the packets resolved so far."""
    import torch

    found = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, rest = qualified.partition("::")
        if namespace != "aten":
            continue
        name, _, overload = rest.partition(".")
        op = getattr(getattr(torch.ops.aten, name), overload or "default")
        if torch.Tag.core in op.tags:
            found.add(str(op))
    return sorted(found)


def core_decompositions() -> dict[Any, Any]:
    """torch._decomp's decompositions of CORE_DECOMPOSED (by OpOverload), and var_mean as the
    var and mean kernels (torch._decomp's goes to prims)."""
    import torch
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    table = dict(get_decompositions([getattr(aten, name) for name in CORE_DECOMPOSED]))
    table[aten.var_mean.correction] = _var_mean
    return table


def _var_mean(
    x: torch.Tensor,
    dim: int | list[int] | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
) -> tuple[Any, Any]:
    import torch

    aten = torch.ops.aten
    var = aten.var.correction(x, dim, correction=correction, keepdim=keepdim)
    return var, aten.mean.dim(x, dim, keepdim)
