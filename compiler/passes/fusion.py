"""Fusion: group IR nodes into kernels.

Each big op (matmul, conv, softmax, layer norm, embedding, pooling, loss) starts a kernel; every
elementwise, reduction, view and getitem node joins the kernel of its latest producer (an
epilogue: `addmm + gelu`, `conv + relu`, a weight's optimizer update joins the kernel that
computed its gradient). Nodes that read only graph inputs join their first consumer's kernel.
Forward nodes copied by activation recomputation (`passes.recompute`, key `recompute_for`) join
the kernel of the backward node they are recomputed for and never start a kernel of their own.
`merge_to_count` then merges neighbouring kernels until there are no more than a region holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from compiler.ir import consumers, node_inputs
from compiler.ops import ANCHOR_CLASSES, op_class

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph

RECOMPUTE_FOR: Final = "recompute_for"  # see compiler.passes.recompute


@dataclass
class Kernel:
    """A group of IR nodes that runs as one program on one rectangle of PEs."""

    id: str
    op: str
    nodes: list[str] = field(default_factory=list)
    flops: int = 0


def fuse(graph: IrGraph) -> list[Kernel]:
    """Assign every node to a kernel (in topological order); returns kernels in execution order."""
    kernel_of: dict[str, int] = {}
    ops: list[str] = []
    for node in graph["nodes"]:
        if RECOMPUTE_FOR in node:
            continue
        kind = op_class(node["target"])
        producers = [kernel_of[r] for r in node_inputs(node) if r in kernel_of]
        if kind in ANCHOR_CLASSES:
            kernel_of[node["name"]] = len(ops)
            ops.append(kind)
        elif producers:
            kernel_of[node["name"]] = max(producers)
    _assign_orphans(graph, kernel_of, ops)
    for node in graph["nodes"]:
        if RECOMPUTE_FOR in node:
            kernel_of[node["name"]] = kernel_of[node[RECOMPUTE_FOR]]
    kernels = [Kernel(id="", op=op) for op in ops]
    for node in graph["nodes"]:
        kernels[kernel_of[node["name"]]].nodes.append(node["name"])
    kernels = [k for k in kernels if k.nodes]
    for i, kernel in enumerate(kernels):
        kernel.id = f"k{i}"
    return kernels


def _assign_orphans(graph: IrGraph, kernel_of: dict[str, int], ops: list[str]) -> None:
    """Nodes fed only by graph inputs (creation ops, updates of params without grads) join
    their first consumer's kernel, else the last kernel, else a new elementwise kernel."""
    users = consumers(graph)
    for node in reversed(graph["nodes"]):
        name = node["name"]
        if name in kernel_of or RECOMPUTE_FOR in node:
            continue
        owners = [kernel_of[u] for u in users.get(name, []) if u in kernel_of]
        if owners:
            kernel_of[name] = min(owners)
        else:
            if not ops:
                ops.append("elementwise")
            kernel_of[name] = len(ops) - 1
    # Orphans assigned in reverse may precede their consumers' producers; order is kept by
    # listing nodes per kernel in graph order.


def merge_to_count(kernels: list[Kernel], limit: int) -> list[Kernel]:
    """Merge neighbouring kernels (smallest combined FLOPs first) until len <= limit."""
    kernels = [Kernel(k.id, k.op, list(k.nodes), k.flops) for k in kernels]
    while len(kernels) > max(1, limit):
        i = min(range(len(kernels) - 1), key=lambda j: kernels[j].flops + kernels[j + 1].flops)
        a, b = kernels[i], kernels[i + 1]
        op = a.op if a.flops >= b.flops else b.op
        kernels[i : i + 2] = [Kernel(a.id, op, a.nodes + b.nodes, a.flops + b.flops)]
    for i, kernel in enumerate(kernels):
        kernel.id = f"k{i}"
    return kernels
