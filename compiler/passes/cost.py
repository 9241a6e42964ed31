"""FLOPs of each IR node (the cost model behind kernel sizing and cycle estimates)."""

from __future__ import annotations

import math

from compiler.ir import iter_refs
from compiler.ops import op_class

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph, IrNode

# Input taps each output pixel of grid sampling reads, by interpolation_mode: bilinear,
# nearest, bicubic (wse_sim/runtime/kernels/grid_sample.py).
GRID_SAMPLE_TAPS = {0: 4, 1: 1, 2: 16}

_FLOPS_PER_ELEMENT = {
    "aten._softmax.default": 5,
    "aten._softmax_backward_data.default": 4,
    "aten._log_softmax.default": 5,
    "aten._log_softmax_backward_data.default": 4,
    "aten.native_layer_norm.default": 8,
    "aten.native_layer_norm_backward.default": 12,
    "aten.nll_loss_forward.default": 1,
    "aten.nll_loss_backward.default": 1,
    "aten.mse_loss.default": 3,
    "aten.mse_loss_backward.default": 3,
    "aten.gelu.default": 8,
    "aten.gelu_backward.default": 12,
    # the vision zoo's kernels
    "aten._native_batch_norm_legit_functional.default": 7,
    "aten.native_batch_norm_backward.default": 9,
    "aten.hardswish.default": 5,
    "aten.hardswish_backward.default": 5,
    "aten.hardsigmoid.default": 4,
    "aten.hardsigmoid_backward.default": 3,
}


def shape_table(graph: IrGraph) -> dict[str, list[int] | None]:
    """value name -> shape (first element's shape for tuple outputs)."""
    table: dict[str, list[int] | None] = {i["name"]: i["shape"] for i in graph["inputs"]}
    for node in graph["nodes"]:
        table[node["name"]] = node.get("shape") or (node.get("shapes") or [None])[0]
    return table


def node_flops(node: IrNode, shapes: dict[str, list[int] | None]) -> int:
    """Floating-point operations of one node (multiply-add = 2)."""
    target = node["target"]
    ins = [shapes.get(r) or [] for r in iter_refs(node["args"])]
    out = node.get("shape") or (node.get("shapes") or [[]])[0] or []
    numel: int = math.prod(out) if out else 1
    kind = op_class(target)
    if target == "aten.mm.default" and len(ins) >= 2:
        return 2 * math.prod(ins[0]) * ins[1][-1]
    if target == "aten.addmm.default" and len(ins) >= 3:
        return 2 * math.prod(ins[1]) * ins[2][-1] + numel
    if target == "aten.bmm.default" and len(ins) >= 2:
        return 2 * math.prod(ins[0]) * ins[1][-1]
    if target == "aten.convolution.default" and len(ins) >= 2:
        return 2 * numel * math.prod(ins[1][1:])
    if target == "aten.convolution_backward.default" and len(ins) >= 3:
        return 4 * math.prod(ins[0]) * math.prod(ins[2][1:])
    if target == "aten.grid_sampler_2d_backward.default" and ins:
        # per output value and tap: a multiply-add into the input's gradient, one into the grid's
        mode = node["args"][3]
        taps = GRID_SAMPLE_TAPS.get(mode, 4) if isinstance(mode, int) else 4
        return 4 * taps * math.prod(ins[0])
    if target in _FLOPS_PER_ELEMENT:
        biggest = max([math.prod(s) for s in ins if s] + [numel])
        return _FLOPS_PER_ELEMENT[target] * biggest
    if kind in ("embedding", "pool"):
        return max([math.prod(s) for s in ins if s] + [numel])
    if kind == "reduction":
        return math.prod(ins[0]) if ins and ins[0] else numel
    if kind in ("view", "creation"):
        return 0
    return numel
