"""The operator set of SAM-IR, its decomposition table, op classes and rewrite suggestions.

`SUPPORTED_OPS` lists every `target` a graph may contain after tracing; the runtime implements a
kernel for each. Big kernels stay single ops (mm/addmm/bmm, convolution, softmax, log_softmax,
layer norm, embedding, pooling, the losses) together with their backward forms; everything else is
decomposed by PyTorch's core ATen decompositions to elementwise, reduction and view ops.
"""

from __future__ import annotations

from typing import Any

from compiler.core_ops import CORE_KERNEL_OPS, REFUSED, core_decompositions
from wse_sim.ops import ANCHOR_OPS, REDUCTION_OPS

# Ops kept whole (not decomposed) because a wafer kernel implements each as one program: the
# kernel families of `wse_sim.ops`, dropout and the activations with their backward forms.
KEPT_WHOLE = frozenset().union(*ANCHOR_OPS.values()) | {
    "aten.native_dropout.default",
    "aten.native_dropout_backward.default",
    "aten.gelu.default",
    "aten.gelu_backward.default",
    "aten.threshold_backward.default",
    "aten.tanh_backward.default",
    "aten.sigmoid_backward.default",
    "aten.silu.default",
    "aten.silu_backward.default",
    "aten.leaky_relu.default",
    "aten.leaky_relu_backward.default",
    "aten.hardtanh.default",
    "aten.hardtanh_backward.default",
}

ELEMENTWISE_OPS = frozenset(
    {
        "aten.add.Tensor",
        "aten.add.Scalar",
        "aten.sub.Tensor",
        "aten.sub.Scalar",
        "aten.mul.Tensor",
        "aten.mul.Scalar",
        "aten.div.Tensor",
        "aten.div.Scalar",
        "aten.neg.default",
        "aten.exp.default",
        "aten.log.default",
        "aten.sqrt.default",
        "aten.rsqrt.default",
        "aten.pow.Tensor_Scalar",
        "aten.pow.Scalar",
        "aten.pow.Tensor_Tensor",
        "aten.relu.default",
        "aten.tanh.default",
        "aten.sigmoid.default",
        "aten.erf.default",
        "aten.abs.default",
        "aten.reciprocal.default",
        "aten.maximum.default",
        "aten.minimum.default",
        "aten.where.self",
        "aten.clamp.default",
        "aten.clamp_min.default",
        "aten.clamp_max.default",
        "aten.eq.Scalar",
        "aten.eq.Tensor",
        "aten.ne.Scalar",
        "aten.ne.Tensor",
        "aten.gt.Scalar",
        "aten.gt.Tensor",
        "aten.ge.Scalar",
        "aten.ge.Tensor",
        "aten.lt.Scalar",
        "aten.lt.Tensor",
        "aten.le.Scalar",
        "aten.le.Tensor",
        "aten.logical_not.default",
        "aten.logical_and.default",
        "aten.logical_or.default",
        "aten.bitwise_not.default",
        "aten.bitwise_and.Tensor",
        "aten.bitwise_or.Tensor",
        "aten.sign.default",
        "aten.lerp.Scalar",
        "aten.log1p.default",
        "aten.expm1.default",
        "aten.sin.default",
        "aten.cos.default",
        "aten.floor.default",
        "aten.ceil.default",
        "aten.round.default",
        "aten.isnan.default",
        "aten.isinf.default",
        "aten.where.ScalarOther",
        "aten.where.ScalarSelf",
        "aten.masked_fill.Scalar",
        "aten.rsub.Scalar",
        "aten.tril.default",
        "aten.triu.default",
        "aten._to_copy.default",
        "aten.clone.default",
        "aten.copy.default",
    }
)

VIEW_OPS = frozenset(
    {
        "aten.view.default",
        "aten._unsafe_view.default",
        "aten.reshape.default",
        "aten.permute.default",
        "aten.t.default",
        "aten.transpose.int",
        "aten.expand.default",
        "aten.unsqueeze.default",
        "aten.squeeze.dim",
        "aten.squeeze.dims",
        "aten.squeeze.default",
        "aten.slice.Tensor",
        "aten.select.int",
        "aten.split.Tensor",
        "aten.split_with_sizes.default",
        "aten.cat.default",
        "aten.stack.default",
        "aten.alias.default",
        "aten.constant_pad_nd.default",
        "getitem",
    }
)

CREATION_OPS = frozenset(
    {
        "aten.full.default",
        "aten.full_like.default",
        "aten.zeros.default",
        "aten.zeros_like.default",
        "aten.ones.default",
        "aten.ones_like.default",
        "aten.arange.start_step",
        "aten.arange.default",
        "aten.arange.start",
        "aten.scalar_tensor.default",
        "aten.empty.memory_format",
        "aten.empty_strided.default",
        "aten.empty_like.default",
        "aten.bernoulli.p",  # dropout masks: the runtime draws them from its own (seed, step) stream
    }
)

# The vision zoo's kernels beyond the families (hard activations; batch norm and adaptive pooling
# are families of `wse_sim.ops`).
VISION_KEPT_WHOLE = frozenset(
    {
        "aten.hardswish.default",
        "aten.hardswish_backward.default",
        "aten.hardsigmoid.default",
        "aten.hardsigmoid_backward.default",
        # writes through views (timm's channels-last LayerNorm2d): functionalization's strided forms
        "aten.as_strided.default",
        "aten.as_strided_scatter.default",
    }
)
KEPT_WHOLE = KEPT_WHOLE | VISION_KEPT_WHOLE

SUPPORTED_OPS: frozenset[str] = (
    KEPT_WHOLE | ELEMENTWISE_OPS | REDUCTION_OPS | VIEW_OPS | CREATION_OPS
)

# Op class used by fusion and the cost model: the kernel family a node belongs to.
ANCHOR_CLASSES = frozenset(ANCHOR_OPS)

SUGGESTIONS: dict[str, str] = {
    "aten.nonzero.default": "data-dependent output shape; use a mask: torch.where(cond, x, 0) or x * cond",
    "aten.sort.default": "sorting has no wafer kernel; sort on the host in make_batch, or use a softmax weighting instead of an order",
    "aten.sort.stable": "sorting has no wafer kernel; precompute the order on the host in make_batch",
    "aten.topk.default": "top-k selection has no wafer kernel; use a softmax or max reduction (amax) instead of topk",
    "aten.argsort.default": "precompute the order on the host in make_batch",
    "aten.unique.default": "data-dependent output shape; precompute on the host in make_batch",
    "aten._unique2.default": "data-dependent output shape; precompute on the host in make_batch",
    "aten.masked_select.default": "data-dependent output shape; use torch.where(mask, x, 0)",
    "aten.index.Tensor": "advanced indexing; use embedding (F.embedding) or one-hot @ matrix",
    "aten.index_put.default": "use torch.where with a mask instead of indexed assignment",
    "aten.native_batch_norm.default": "call batch norm through nn.BatchNorm*d / F.batch_norm (SAM traces those with running statistics)",
    "aten.sym_size.int": "reads a data-dependent size; keep tensor shapes static",
    "aten.is_nonzero.default": "Python control flow on a tensor value (if/while on a tensor); use torch.where so the graph is static",
    "aten._local_scalar_dense.default": "a .item()/bool(tensor) call makes control flow data-dependent; keep values as tensors (torch.where)",
    "aten.cumsum.default": "use a matmul with a triangular ones matrix (torch.tril)",
    "aten.bincount.default": "use one-hot encoding and a sum",
    "aten.multinomial.default": "sample on the host in make_batch",
    "aten.linalg_inv.default": "matrix inversion has no wafer kernel; solve on the host",
}


def op_class(target: str) -> str:
    """Kernel family of an op: matmul, conv, softmax, layer_norm, embedding, pool, loss,
    elementwise, reduction, view, creation or other."""
    for name, members in ANCHOR_OPS.items():
        if target in members:
            return name
    if target in ELEMENTWISE_OPS or target in KEPT_WHOLE:
        return "elementwise"
    if target in REDUCTION_OPS:
        return "reduction"
    if target in VIEW_OPS:
        return "view"
    if target in CREATION_OPS:
        return "creation"
    return "other"


def hint_for(target: str) -> tuple[str | None, str | None]:
    """(why the wafer has no kernel, what to write instead) for an unsupported op, each when
    known: a hint reads 'reason; alternative', or is an alternative alone."""
    text = SUGGESTIONS.get(target) or SUGGESTIONS.get(target.rsplit(".", 1)[0] + ".default")
    if not text:
        return None, None
    reason, sep, alternative = text.partition("; ")
    return (reason, alternative) if sep else (None, text)


def decomposition_table() -> dict[Any, Any]:
    """make_fx decompositions: PyTorch's core ATen table minus the ops kept whole."""
    import torch
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    for op in list(table):
        if str(op) in SUPPORTED_OPS:  # the runtime has a kernel: keep the op whole
            del table[op]
    # Composite ops that core ATen keeps but SAM decomposes further (fewer kernels to write),
    # and the core ops of `compiler.core_ops.CORE_DECOMPOSED` (group norm, padding modes...).
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    table.update(
        get_decompositions([aten.addcmul, aten.addcdiv, aten.lerp.Tensor, aten.empty_permuted])
    )
    table.update(
        {op: fn for op, fn in core_decompositions().items() if str(op) not in SUPPORTED_OPS}
    )
    return table


def decomposable_op_names() -> frozenset[str]:
    """Targets that `decomposition_table()` rewrites into other ops during tracing."""
    global _DECOMPOSABLE
    if _DECOMPOSABLE is None:
        _DECOMPOSABLE = frozenset(str(op) for op in decomposition_table())
    return _DECOMPOSABLE


_DECOMPOSABLE: frozenset[str] | None = None


# Ops the transformer zoo (transformers and timm models) needs beyond the set above: mask
# construction (cumsum over positions, advanced indexing of mask grids), the backward forms of
# slicing (rotary embeddings' halves, qkv splits) and gathers. Each has a wafer kernel in
# wse_sim/runtime/kernels (text.py, indexing.py).
TRANSFORMER_OPS = frozenset(
    {
        "aten.cumsum.default",
        "aten.lift_fresh_copy.default",
        "aten.index.Tensor",
        "aten.index_put.default",
        "aten._unsafe_index_put.default",
        "aten.slice_scatter.default",
        "aten.select_scatter.default",
        "aten.gather.default",
        "aten.scatter.value",
        "aten.scatter.src",
        "aten.scatter_add.default",
        "aten.index_select.default",
        "aten.baddbmm.default",
        "aten.masked_fill.Tensor",
        "aten.repeat.default",
        "aten.flip.default",
        "aten.div.Tensor_mode",
        "aten.remainder.Scalar",
        "aten.remainder.Tensor",
        "aten.prod.default",
        "aten.all.default",
        "aten.all.dim",
        "aten.any.default",
        "aten.any.dims",
        "aten.logical_xor.default",
        "aten.bitwise_xor.Tensor",
        "aten.square.default",
        "aten.trunc.default",
        "aten.log2.default",
        "aten.exp2.default",
    }
)
SUPPORTED_OPS = SUPPORTED_OPS | TRANSFORMER_OPS | CORE_KERNEL_OPS
# The core ops SAM refuses say why (compiler.core_ops.REFUSED), beside the hints above.
SUGGESTIONS.update({op: why for op, why in REFUSED.items() if op not in SUPPORTED_OPS})
SUGGESTIONS.pop("aten.cumsum.default", None)
SUGGESTIONS.pop("aten.index.Tensor", None)
SUGGESTIONS.pop("aten.index_put.default", None)
