"""The op classes of SAM-IR: which kernel family each `target` belongs to (the one home).

The simulator's timing plan (`wse_sim.runtime.timing`) charges collectives by these classes and
the compiler (`compiler.ops`) uses them for fusion anchors, its cost model and the supported-op
set; the compiler imports them from here (the simulator never imports the compiler).
"""

from __future__ import annotations

MATMUL_OPS = frozenset({"aten.mm.default", "aten.addmm.default", "aten.bmm.default"})
CONV_OPS = frozenset({"aten.convolution.default", "aten.convolution_backward.default"})
SOFTMAX_OPS = frozenset(
    {
        "aten._softmax.default",
        "aten._softmax_backward_data.default",
        "aten._log_softmax.default",
        "aten._log_softmax_backward_data.default",
    }
)
LAYER_NORM_OPS = frozenset(
    {"aten.native_layer_norm.default", "aten.native_layer_norm_backward.default"}
)
EMBEDDING_OPS = frozenset({"aten.embedding.default", "aten.embedding_dense_backward.default"})
POOL_OPS = frozenset(
    {
        "aten.max_pool2d_with_indices.default",
        "aten.max_pool2d_with_indices_backward.default",
        "aten.avg_pool2d.default",
        "aten.avg_pool2d_backward.default",
        "aten._adaptive_avg_pool2d.default",
        "aten._adaptive_avg_pool2d_backward.default",
        "aten.adaptive_max_pool2d.default",
        "aten.adaptive_max_pool2d_backward.default",
    }
)
# Batch norm in training mode: reduces per channel (sum and sum of squares forward; sum of dy
# and dy * x backward).
BATCH_NORM_OPS = frozenset(
    {"aten._native_batch_norm_legit_functional.default", "aten.native_batch_norm_backward.default"}
)
LOSS_FORWARD_OPS = frozenset({"aten.nll_loss_forward.default", "aten.mse_loss.default"})
LOSS_OPS = LOSS_FORWARD_OPS | {"aten.nll_loss_backward.default", "aten.mse_loss_backward.default"}

# The kernel families a fused kernel is built around (the compiler's fusion anchors).
ANCHOR_OPS: dict[str, frozenset[str]] = {
    "matmul": MATMUL_OPS,
    "conv": CONV_OPS,
    "softmax": SOFTMAX_OPS,
    "layer_norm": LAYER_NORM_OPS,
    "embedding": EMBEDDING_OPS,
    "pool": POOL_OPS,
    "batch_norm": BATCH_NORM_OPS,
    "loss": LOSS_OPS,
}

# Reductions whose partial values the PEs of a row combine (sum, mean, extremes, variance...).
SUM_LIKE_REDUCTIONS = frozenset(
    {
        "aten.sum.dim_IntList",
        "aten.sum.default",
        "aten.mean.dim",
        "aten.mean.default",
        "aten.amax.default",
        "aten.amin.default",
        "aten.var.correction",
        "aten.any.dim",
    }
)
# Reductions that return positions (max/min along a dim, argmax/argmin). The timing plan charges
# them no row reduction: its model has no step that combines (value, index) pairs across PEs.
SELECTING_REDUCTIONS = frozenset(
    {"aten.max.dim", "aten.min.dim", "aten.argmax.default", "aten.argmin.default"}
)
REDUCTION_OPS = SUM_LIKE_REDUCTIONS | SELECTING_REDUCTIONS
