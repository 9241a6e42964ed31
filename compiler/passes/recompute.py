"""Activation recomputation (gradient checkpointing): recompute in the backward pass the forward
values that are kept only for it, instead of keeping them in SRAM.

In a pipelined step every kernel keeps the values other kernels read (`passes.memory`): values
in flight to the next forward kernel and values stashed for the backward pass. A value whose
only readers outside its kernel are backward nodes (a GELU's input, attention scores before the
mask, a normalisation's statistics) is held just so the backward can read it. With
`compile_options.activation_recomputation` this pass rewrites the graph so that each backward
kernel recomputes those values itself: the forward nodes that produce them inside their kernel
are copied into the backward kernel, starting from values the wafer holds anyway (in-flight
activations from other kernels, parameters, the batch). The copies are the same ops on the same
inputs, so losses and updates are those of the step without recomputation (to fp32 rounding:
a copied matmul runs on the backward kernel's rectangle, which blocks its sums differently); the
stashed bytes leave the memory plan and the copies' FLOPs are charged to the backward kernels
(the cycle estimate and the simulator's timing both count them).

Values from random ops (dropout masks) are never recomputed: drawing them again would give other
masks. Values smaller than MIN_BYTES are kept too (recomputing a tensor of a few statistics would
cost a whole kernel's work for nothing).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from compiler.ir import node_inputs, tensor_bytes
from compiler.ops import op_class
from compiler.passes.fusion import RECOMPUTE_FOR as MARK
from compiler.passes.fusion import fuse
from sam_domain.ir import ref_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import RecomputeSummary
    from sam_domain.ir import IrGraph, IrNode
    from sam_domain.json_value import JsonValue

RANDOM_OPS = frozenset({"aten.bernoulli.p", "aten.native_dropout.default"})
MIN_BYTES = 1024


@dataclass
class RecomputeReport:
    """What the pass did, for the compile summary."""

    values: int  # stashed values now recomputed
    stashed_bytes: int  # their bytes (no longer kept between forward and backward)
    copied_nodes: int  # forward nodes copied into backward kernels

    def to_summary(self) -> RecomputeSummary:
        """The summary's `activation_recomputation` section."""
        return {
            "recomputed_values": self.values,
            "stashed_bytes_freed": self.stashed_bytes,
            "copied_nodes": self.copied_nodes,
        }


def forward_nodes(graph: IrGraph) -> set[str]:
    """Names of the nodes the loss depends on (the forward pass and the loss)."""
    nodes = {n["name"]: n for n in graph["nodes"]}
    loss = next(o["ref"] for o in graph["outputs"] if o["role"] == "loss")
    seen: set[str] = set()
    todo = [loss]
    while todo:
        name = todo.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        todo.extend(node_inputs(nodes[name]))
    return seen


def recompute_activations(graph: IrGraph) -> tuple[IrGraph, RecomputeReport]:
    """(new graph, report): `graph` with stashed-only forward values recomputed by the backward
    kernels that read them (see the module docstring); the input graph is not modified."""
    nodes = {n["name"]: n for n in graph["nodes"]}
    kernel_of = {n: i for i, k in enumerate(fuse(graph)) for n in k.nodes}
    forward = forward_nodes(graph)
    readers: dict[str, list[str]] = {}
    for node in graph["nodes"]:
        for ref in node_inputs(node):
            readers.setdefault(ref, []).append(node["name"])
    held = _held_values(graph, nodes, kernel_of, forward, readers)
    # backward kernel -> the forward values it will recompute
    wanted: dict[int, dict[str, None]] = {}
    freed: dict[str, int] = {}
    for name in forward:
        node = nodes[name]
        shape = node.get("shape")
        if name in held or not shape or op_class(node["target"]) == "view":
            continue
        size = tensor_bytes(shape, node.get("dtype"))
        outside = [r for r in readers.get(name, []) if kernel_of[r] != kernel_of[name]]
        if size < MIN_BYTES or not outside:
            continue
        sub = _producers(name, nodes, kernel_of, held, forward)
        if any(nodes[n]["target"] in RANDOM_OPS for n in sub):
            continue
        freed[name] = size
        for reader in outside:
            wanted.setdefault(kernel_of[reader], {}).update(dict.fromkeys(sub))
    if not freed:
        return graph, RecomputeReport(0, 0, 0)
    new_graph, copied = _rewrite(graph, nodes, kernel_of, forward, wanted)
    return new_graph, RecomputeReport(len(freed), sum(freed.values()), copied)


def _held_values(
    graph: IrGraph,
    nodes: dict[str, IrNode],
    kernel_of: dict[str, int],
    forward: set[str],
    readers: dict[str, list[str]],
) -> set[str]:
    """Forward values the wafer keeps anyway: read by another kernel's forward nodes (in flight),
    graph outputs (new buffers) and random draws."""
    held = {o["ref"] for o in graph["outputs"]}
    for name in forward:
        if nodes[name]["target"] in RANDOM_OPS:
            held.add(name)
            continue
        for reader in readers.get(name, []):
            if reader in forward and kernel_of[reader] != kernel_of[name]:
                held.add(name)
                break
    return held


def _producers(
    name: str,
    nodes: dict[str, IrNode],
    kernel_of: dict[str, int],
    held: set[str],
    forward: set[str],
) -> list[str]:
    """The forward nodes of `name`'s kernel needed to recompute it from held values and graph
    inputs, in graph order."""
    kernel = kernel_of[name]
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for ref in node_inputs(nodes[current]):
            if ref in forward and kernel_of[ref] == kernel and ref not in held:
                todo.append(ref)
    order = {n: i for i, n in enumerate(nodes)}
    return sorted(seen, key=order.__getitem__)


def _rewrite(
    graph: IrGraph,
    nodes: dict[str, IrNode],
    kernel_of: dict[str, int],
    forward: set[str],
    wanted: dict[int, dict[str, None]],
) -> tuple[IrGraph, int]:
    """The graph with one copy of each wanted forward node per backward kernel, placed just before
    that kernel's first reader, and the kernel's backward readers reading the copies."""
    out = copy.deepcopy(graph)
    first_reader: dict[int, str] = {}
    for node in graph["nodes"]:
        kernel = kernel_of[node["name"]]
        if kernel in wanted and node["name"] not in forward and kernel not in first_reader:
            if set(node_inputs(node)) & set(wanted[kernel]):
                first_reader[kernel] = node["name"]
    renamed = {k: {n: f"{n}.rc{k}" for n in names} for k, names in wanted.items()}
    inserts: dict[str, list[IrNode]] = {}
    copied = 0
    for kernel, names in wanted.items():
        if kernel not in first_reader:
            continue
        mapping = renamed[kernel]
        for name in names:
            clone = copy.deepcopy(nodes[name])
            clone["name"] = mapping[name]
            clone["args"] = [_renamed(v, mapping) for v in clone.get("args", [])]
            clone["kwargs"] = {k: _renamed(v, mapping) for k, v in clone.get("kwargs", {}).items()}
            clone[MARK] = first_reader[kernel]
            inserts.setdefault(first_reader[kernel], []).append(clone)
            copied += 1
    new_nodes = []
    for node in out["nodes"]:
        new_nodes.extend(inserts.get(node["name"], []))
        kernel = kernel_of[node["name"]]
        if node["name"] not in forward and kernel in first_reader:
            mapping = renamed[kernel]
            node["args"] = [_renamed(v, mapping) for v in node.get("args", [])]
            node["kwargs"] = {k: _renamed(v, mapping) for k, v in node.get("kwargs", {}).items()}
        new_nodes.append(node)
    out["nodes"] = new_nodes
    return out, copied


def _renamed(value: JsonValue, mapping: dict[str, str]) -> JsonValue:
    """An encoded argument with its refs renamed by `mapping`."""
    if isinstance(value, dict):
        ref = ref_name(value)
        if ref is not None:
            return {"ref": mapping.get(ref, ref)}
        return {k: _renamed(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, mapping) for v in value]
    return value


__all__ = ["MARK", "RecomputeReport", "forward_nodes", "recompute_activations"]
