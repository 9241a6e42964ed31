"""Memory planning: bytes each kernel keeps in SRAM, by category, and per PE for an area.

Categories (per kernel, in bytes over the whole kernel):
- weights: parameters the kernel owns (a parameter is owned by the kernel that last reads it,
  i.e. the one that computes its gradient and runs its optimizer update);
- gradients: one gradient per owned parameter (it lives beside the weight shard);
- optimizer: the owned parameters' optimizer state (0 when offloaded to the host);
- activations: values this kernel produces that another kernel (or the step's outputs) reads,
  i.e. stashed for backward or in flight, plus the kernel's largest working tensor;
- reserve: per PE, for code, stack and router state (`ArchInfo.sram_reserved_bytes`).
In weight_streaming mode a kernel's weights and gradients are streamed tiles (counted only while
it runs), optimizer state stays on the host, and all kernels time-share the whole region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir import consumers, node_inputs, tensor_bytes
from compiler.ops import op_class
from compiler.passes.fusion import Kernel
from compiler.plan_options import PlanOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph

CATEGORIES = ("weights", "gradients", "optimizer", "activations")


@dataclass
class KernelMemory:
    """Bytes (whole kernel) per category, the params it owns and its symbols for the memory map."""

    weights: int = 0
    gradients: int = 0
    optimizer: int = 0
    activations: int = 0
    params: tuple[str, ...] = ()
    symbols: tuple[tuple[str, str, int], ...] = ()  # (symbol, category, bytes)
    offloaded: int = 0  # optimizer-state bytes kept in host memory (optimizer_state_offload)

    def total(self) -> int:
        """Bytes over the whole kernel, all categories."""
        return self.weights + self.gradients + self.optimizer + self.activations

    def per_pe(self, area: int, reserve: int) -> dict[str, int]:
        """Bytes per PE by category when spread over `area` PEs (ceil), plus the reserve."""
        spread = {c: math.ceil(getattr(self, c) / max(1, area)) for c in CATEGORIES}
        return {**spread, "reserve": reserve}


def plan_memory(graph: IrGraph, kernels: list[Kernel], options: PlanOptions) -> list[KernelMemory]:
    """KernelMemory for each kernel. options: fp16 (bool), optimizer_offload (bool), streaming (bool)."""
    kernel_of = {n: i for i, k in enumerate(kernels) for n in k.nodes}
    plans = [KernelMemory() for _ in kernels]
    _add_weights(graph, kernel_of, plans, bool(options.get("optimizer_offload")))
    act_scale = 0.5 if options.get("fp16") else 1.0
    _add_crossing_activations(graph, kernel_of, plans, act_scale)
    _add_working_set(graph, kernels, plans, act_scale)
    _add_batch(graph, kernels, kernel_of, plans)
    return plans


def _add_weights(
    graph: IrGraph, kernel_of: dict[str, int], plans: list[KernelMemory], offload: bool
) -> None:
    """Each parameter, its gradient and its optimizer state, on the kernel that owns it."""
    inputs = {i["name"]: i for i in graph["inputs"]}
    state_of = _state_by_param(graph)
    accumulators = _state_by_param(graph, role="grad_acc")

    def size_of(name: str) -> int:
        return tensor_bytes(inputs[name]["shape"], inputs[name]["dtype"])

    for param, k in _param_owners(graph, kernel_of).items():
        size = size_of(param)
        grad = size if inputs[param]["role"] == "param" else 0
        # A micro-batched step keeps a gradient accumulator beside each gradient.
        grad += sum(size_of(a) for a in accumulators.get(param, []))
        states = [] if offload else state_of.get(param, [])
        plan = plans[k]
        plan.weights += size
        plan.gradients += grad
        plan.optimizer += sum(size_of(s) for s in states)
        plan.offloaded += sum(size_of(s) for s in state_of.get(param, [])) if offload else 0
        plan.params += (param,)
        plan.symbols += ((param, "weights", size),)
        plan.symbols += ((param + ".grad", "gradients", grad),) if grad else ()
        plan.symbols += tuple((s, "optimizer", size_of(s)) for s in states)


def _add_crossing_activations(
    graph: IrGraph, kernel_of: dict[str, int], plans: list[KernelMemory], scale: float
) -> None:
    """Values another kernel reads: stashed for backward or in flight between kernels."""
    users = consumers(graph)
    for node in graph["nodes"]:
        shape = node.get("shape")
        if op_class(node["target"]) == "view" or not shape:
            continue
        k = kernel_of[node["name"]]
        # Step outputs (new weights and optimizer state) overwrite the old values in place, so
        # only reads by another kernel make a value a stashed or in-flight activation.
        readers = {kernel_of[u] for u in users.get(node["name"], []) if u in kernel_of}
        if readers - {k}:
            size = int(tensor_bytes(shape, node.get("dtype")) * scale)
            plans[k].activations += size
            plans[k].symbols += ((node["name"], "activations", size),)


def _add_working_set(
    graph: IrGraph, kernels: list[Kernel], plans: list[KernelMemory], scale: float
) -> None:
    """The kernel's largest intermediate; gradients and updates of its own weights are already
    counted as gradients/weights, so tensors shaped like an owned parameter are left out."""
    nodes = {n["name"]: n for n in graph["nodes"]}
    shapes = {i["name"]: i["shape"] for i in graph["inputs"]}
    for kernel, plan in zip(kernels, plans, strict=False):
        owned = {tuple(shapes[p]) for p in plan.params}
        sizes = [
            tensor_bytes(shape, nodes[n].get("dtype"))
            for n in kernel.nodes
            if (shape := nodes[n].get("shape"))
            and op_class(nodes[n]["target"]) != "view"
            and tuple(shape) not in owned
        ]
        biggest = int(max(sizes, default=0) * scale)
        plan.activations += biggest
        plan.symbols += ((f"{kernel.id}.scratch", "activations", biggest),)


def _add_batch(
    graph: IrGraph,
    kernels: list[Kernel],
    kernel_of: dict[str, int],
    plans: list[KernelMemory],
) -> None:
    """The batch's inputs/targets live with the first kernel that reads them."""
    for inp in graph["inputs"]:
        if inp["role"] not in ("input", "target"):
            continue
        readers = [kernel_of[n["name"]] for n in graph["nodes"] if inp["name"] in node_inputs(n)]
        if readers:
            size = tensor_bytes(inp["shape"], inp["dtype"])
            plans[min(readers)].activations += size
            plans[min(readers)].symbols += ((inp["name"], "activations", size),)


def _param_owners(graph: IrGraph, kernel_of: dict[str, int]) -> dict[str, int]:
    """A parameter lives on the kernel that last reads it: the one running its optimizer update
    (beside its gradient); earlier readers (the forward pass) receive it over the fabric."""
    params = [i["name"] for i in graph["inputs"] if i["role"] in ("param", "buffer", "constant")]
    wanted = set(params)
    owner: dict[str, int] = {}
    for node in graph["nodes"]:
        for ref in node_inputs(node):
            if ref in wanted:
                owner[ref] = kernel_of[node["name"]]
    last = max(kernel_of.values(), default=0)
    return {p: owner.get(p, last) for p in params}


def _state_by_param(graph: IrGraph, role: str = "opt_state") -> dict[str, list[str]]:
    """Param input name -> names of its `role` inputs (source names "<param>.<what>")."""
    by_source = {i["source_name"]: i["name"] for i in graph["inputs"] if i["role"] == "param"}
    result: dict[str, list[str]] = {}
    for inp in graph["inputs"]:
        if inp["role"] == role:
            param_source = inp["source_name"].rsplit(".", 1)[0]
            if param_source in by_source:
                result.setdefault(by_source[param_source], []).append(inp["name"])
    return result
