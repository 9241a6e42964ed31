"""The timing plan of a training step: the block-engine operations one step issues, in order.

Built once at load from the manifest's kernels (rectangles, FLOPs, resident weights) and the
graph's edges: for every kernel, host input streams (the batch; the weights too in
weight_streaming mode), transfers from producer kernels' rectangles (hop distance x words; a
resident weight travels from the kernel that holds it to each other user), the SUMMA row/column
broadcasts of its distributed matmuls, its compute (FLOPs per PE at the arch rate) and the row
reductions of its reducing ops; then the loss goes to the host and the region synchronises.

A step starts from synchronised clocks (the previous step ended with a barrier) and its data
never change its timing, so the plan's effect on the region is the same every step. The first
step runs the plan through `wse_sim`'s engine and records the per-PE deltas it caused; later
steps apply the recorded deltas (`StepCharger`), which costs a few array adds instead of
hundreds of engine calls. `StepCharger(replay=True)` replays the engine every step instead.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import wse_sim
from sam_domain.geometry import Rect
from sam_domain.ir import IrGraph, IrNode, ManifestKernel, Shape, iter_refs, node_refs, ref_of
from sam_domain.json_value import JsonValue
from wse_sim.fabric import Region
from wse_sim.ops import (
    BATCH_NORM_OPS,
    CONV_OPS,
    LAYER_NORM_OPS,
    LOSS_FORWARD_OPS,
    MATMUL_OPS,
    SOFTMAX_OPS,
    SUM_LIKE_REDUCTIONS,
)
from wse_sim.runtime.kernels.matmul import summa_steps

# Ops charged a row reduction: the sum-like reductions, the row-wise kernels (softmax, layer
# norm, the losses' forwards), batch norm's per-channel sums, and a prefix sum (the transformer
# zoo's position and mask construction scans each PE's tile and passes the running carry east
# along the row: charged like a row reduction of its rows).
REDUCING_TARGETS = (
    SUM_LIKE_REDUCTIONS
    | SOFTMAX_OPS
    | LAYER_NORM_OPS
    | LOSS_FORWARD_OPS
    | BATCH_NORM_OPS
    | {"aten.cumsum.default"}
)
MAX_BROADCAST_ROUNDS = 32  # SUMMA steps are charged in at most this many broadcast rounds
_WORDS_PER_ELEMENT = {
    "float32": 1.0,
    "float16": 0.5,
    "bfloat16": 0.5,
    "int64": 2.0,
    "int32": 1.0,
    "bool": 0.25,
    "float64": 2.0,
}


@dataclass(frozen=True)
class Charge:
    """One engine operation of the plan: which kernel, what kind, and the call itself."""

    kernel: str
    kind: str  # host | transfer | broadcast | compute | reduce | sync | offload
    run: Callable[..., int]  # run(region=...) -> cycles


@dataclass
class TimingPlan:
    """The ordered engine operations of one training step."""

    charges: list[Charge] = field(default_factory=list)

    def run(self, region: Region) -> dict[str, dict[str, int]]:
        """Issue every charge on `region`; returns kernel -> kind -> cycles the calls reported."""
        cycles: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for charge in self.charges:
            cycles[charge.kernel][charge.kind] += charge.run(region=region)
        return {k: dict(v) for k, v in cycles.items()}


def _call(op: Callable[..., Any], *args: Any, region: Region) -> int:
    """Apply a block-engine op to `region` (the plan binds the other arguments at build time)."""
    return int(op(region, *args))


def _numel(shape: Shape | None) -> int:
    return int(math.prod(shape)) if shape is not None else 0


def _words(shape: Shape | None, dtype: str | None, fp16: bool) -> int:
    per = _WORDS_PER_ELEMENT.get(dtype or "float32", 1.0)
    if fp16 and dtype == "float32":
        per = 0.5
    return max(1, math.ceil(_numel(shape) * per)) if shape is not None else 0


class _GraphFacts:
    """Shapes, dtypes and owning kernel of every value in the graph."""

    def __init__(self, graph: IrGraph, kernels: list[ManifestKernel]) -> None:
        self.shape: dict[str, Shape | None] = {}
        self.dtype: dict[str, str | None] = {}
        self.owner: dict[str, str | None] = {}
        self.role: dict[str, str] = {}
        for inp in graph["inputs"]:
            self.shape[inp["name"]], self.dtype[inp["name"]] = inp["shape"], inp["dtype"]
            self.owner[inp["name"]], self.role[inp["name"]] = None, inp["role"]
        self._place_weights(graph, kernels)
        self.batch_kernel: str | None = None
        for node in graph["nodes"]:
            refs = list(node_refs(node))
            kernel = node.get("kernel") or next(
                (self.owner[r] for r in refs if self.owner.get(r)), None
            )
            for ref in refs:
                # inputs and targets travel in one host transaction, into the first consumer's rect
                if self.role.get(ref) in ("input", "target") and self.owner[ref] is None:
                    self.batch_kernel = self.batch_kernel or kernel
                    self.owner[ref] = self.batch_kernel
            self.owner[node["name"]] = kernel
            self.shape[node["name"]] = node.get("shape")
            self.dtype[node["name"]] = node.get("dtype")

    def dims(self, name: str) -> Shape:
        """The shape of a value that is one tensor (ValueError for a tuple's or an unknown)."""
        shape = self.shape[name]
        if shape is None:
            raise ValueError(f"value {name} has no single tensor shape")
        return shape

    def _place_weights(self, graph: IrGraph, kernels: list[ManifestKernel]) -> None:
        """A resident parameter (and its optimizer state) lives in the kernel that lists it."""
        home = {p: k["id"] for k in kernels for p in k.get("weights") or []}
        source_home = {}
        for inp in graph["inputs"]:
            if inp["name"] in home:
                self.owner[inp["name"]] = home[inp["name"]]
                source_home[inp.get("source_name") or inp["name"]] = home[inp["name"]]
        for inp in graph["inputs"]:
            if inp["role"] == "opt_state":
                param = (inp.get("source_name") or "").rsplit(".", 1)[0]
                self.owner[inp["name"]] = source_home.get(param)


def build_plan(
    graph: IrGraph,
    kernels: list[ManifestKernel],
    *,
    fp16: bool,
    weight_streaming: bool,
    region_shape: tuple[int, int],
    optimizer_offload: bool = False,
    global_checks: tuple[str, ...] | list[str] = (),
) -> TimingPlan:
    """The timing plan of one step (see the module docstring).

    kernels: the manifest's kernel list ({id, rect, flops, nodes}); region_shape: (rows, cols).
    optimizer_offload: optimizer state streams in from the host before each kernel's update and
    back out after it ("offload" charges over the host link). global_checks: names of one-word
    whole-region allreduces (the global gradient norm, the inf/nan check) each step runs.
    """
    facts = _GraphFacts(graph, kernels)
    # a manifest rect has 4 entries (the planner writes them); tuple() cannot say so to mypy
    rects: dict[str, Rect] = {k["id"]: tuple(int(v) for v in k["rect"]) for k in kernels}  # type: ignore[misc]
    flops = {k["id"]: int(k.get("flops") or 0) for k in kernels}
    whole: Rect = (0, 0, region_shape[0], region_shape[1])
    nodes_of: dict[str, list[IrNode]] = defaultdict(list)
    for node in graph["nodes"]:
        nodes_of[facts.owner[node["name"]] or "_"].append(node)
    order = list(dict.fromkeys(facts.owner[n["name"]] or "_" for n in graph["nodes"]))
    dtype = "float16" if fp16 else "float32"
    plan = TimingPlan()
    for kid in order:
        rect = rects.get(kid, whole)
        _inbound(plan, kid, rect, nodes_of[kid], facts, rects, whole, fp16, weight_streaming)
        if optimizer_offload and not weight_streaming:
            _offload(plan, kid, rect, nodes_of[kid], facts, fp16, inbound=True)
        for node in nodes_of[kid]:
            _collectives(plan, kid, rect, node, facts, fp16)
        per_pe = flops.get(kid, 0) / (rect[2] * rect[3])
        plan.charges.append(
            Charge(kid, "compute", partial(_call, wse_sim.compute, rect, per_pe, dtype))
        )
    for check in global_checks:
        # Each kernel reduces its own gradients locally (in its compute); the partial results
        # then meet in one whole-region allreduce before any update may use them.
        plan.charges.append(Charge(check, "reduce", partial(_call, wse_sim.allreduce, whole, 1)))
    if optimizer_offload and not weight_streaming:
        for kid in order:
            _offload(plan, kid, rects.get(kid, whole), nodes_of[kid], facts, fp16, inbound=False)
    _finish(plan, graph, facts, rects, whole, fp16, weight_streaming)
    return plan


def _offload(
    plan: TimingPlan,
    kid: str,
    rect: Rect,
    nodes: list[IrNode],
    facts: _GraphFacts,
    fp16: bool,
    *,
    inbound: bool,
) -> None:
    """Host-resident optimizer state read by kernel `kid`: in from the host before its update,
    the new state back out after it, both over the host I/O channels of its rectangle."""
    refs = {r for node in nodes for r in node_refs(node)}
    words = sum(
        _words(facts.shape[r], facts.dtype[r], False)
        for r in refs
        if facts.role.get(r) == "opt_state"
    )
    if words:
        move = wse_sim.host_to_region if inbound else wse_sim.region_to_host
        plan.charges.append(
            Charge(kid, "offload", partial(_call, partial(move, streamed=True), words, rect))
        )


def _inbound(
    plan: TimingPlan,
    kid: str,
    rect: Rect,
    nodes: list[IrNode],
    facts: _GraphFacts,
    rects: Mapping[str, Rect],
    whole: Rect,
    fp16: bool,
    weight_streaming: bool,
) -> None:
    """Host streams and producer-to-consumer transfers into kernel `kid`."""
    seen: set[str] = set()
    from_kernel: dict[str, int] = defaultdict(int)
    host_words = 0
    for node in nodes:
        for ref in node_refs(node):
            if ref in seen:
                continue
            seen.add(ref)
            words = _words(facts.shape[ref], facts.dtype[ref], fp16)
            src = facts.owner.get(ref)
            role = facts.role.get(ref)
            if (role in ("input", "target") and src == kid) or (
                weight_streaming and role in ("param", "opt_state")
            ):
                host_words += words
            elif src is not None and src != kid:
                from_kernel[src] += words
    if host_words:
        plan.charges.append(
            # Batches (and streamed weights) flow through an open, prefetching input stream:
            # bandwidth per step, no per-transaction launch overhead.
            Charge(
                kid,
                "host",
                partial(_call, partial(wse_sim.host_to_region, streamed=True), host_words, rect),
            )
        )
    for src, words in from_kernel.items():
        src_rect = rects.get(src, whole)
        per_pe = math.ceil(words / (src_rect[2] * src_rect[3]))
        plan.charges.append(
            Charge(kid, "transfer", partial(_call, wse_sim.transfer, src_rect, rect, per_pe))
        )


def _collectives(
    plan: TimingPlan, kid: str, rect: Rect, node: IrNode, facts: _GraphFacts, fp16: bool
) -> None:
    """SUMMA broadcasts of a distributed matmul/convolution; row reductions of reducing ops."""
    target = node["target"]
    h, w = rect[2], rect[3]
    refs = list(iter_refs(node.get("args", [])))
    if target in MATMUL_OPS:
        a, b = (refs[1], refs[2]) if target == "aten.addmm.default" else (refs[0], refs[1])
        a_shape, b_shape = facts.dims(a), facts.dims(b)
        batch = _numel(a_shape[:-2]) or 1
        m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
        _summa(plan, kid, rect, batch, m, k, n, 0.5 if fp16 else 1.0)
    elif target in CONV_OPS:
        weight_words = _words(
            facts.shape[refs[1] if target.endswith("convolution.default") else refs[2]],
            "float32",
            fp16,
        )
        per_pe = math.ceil(weight_words / w)
        plan.charges.append(
            Charge(kid, "broadcast", partial(_call, wse_sim.broadcast_row, rect, per_pe, 0))
        )
    elif target in REDUCING_TARGETS and w > 1:
        words = max(1, math.ceil(_reduced_count(node, facts) / h))
        plan.charges.append(
            Charge(kid, "reduce", partial(_call, wse_sim.reduce_row, rect, words, 0))
        )


_ROW_OPS = {  # reductions along one axis (the IR arg index of the input and of the axis)
    "aten._softmax.default": (0, 1),
    "aten._log_softmax.default": (0, 1),
    "aten._softmax_backward_data.default": (1, 2),
    "aten._log_softmax_backward_data.default": (1, 2),
}
_ROW_OPS["aten.cumsum.default"] = (0, 1)  # one carry per scanned row
_NORM_OPS = {
    "aten.native_layer_norm.default": (0, 1),
    "aten.native_layer_norm_backward.default": (1, 2),
}


def _ints(values: list[JsonValue]) -> list[int]:
    """An int-list argument's items (ValueError for any other item)."""
    if not all(isinstance(v, int) for v in values):
        raise ValueError(f"expected a list of ints, found {values!r}")
    return [int(v) for v in values if isinstance(v, int)]


def _reduced_count(node: IrNode, facts: _GraphFacts) -> int:
    """How many partial results a reducing op combines across PEs: one per reduced row."""
    args = node.get("args", [])
    target = node["target"]
    if target in BATCH_NORM_OPS:  # two partial sums per channel
        shape = facts.shape[ref_of(args[1 if target.endswith("backward.default") else 0])]
        return 2 * (shape[1] if shape and len(shape) > 1 else 1)
    if target in _ROW_OPS or target in _NORM_OPS:
        data_index, axis_index = _ROW_OPS.get(target) or _NORM_OPS[target]
        name, axis = ref_of(args[data_index]), args[axis_index]
        if target in _ROW_OPS:  # axis: the reduced dim
            if isinstance(axis, int):
                return _numel(facts.shape[name]) // max(1, facts.dims(name)[axis])
        elif isinstance(axis, list):  # axis: the normalized shape
            return _numel(facts.shape[name]) // max(1, math.prod(_ints(axis)))
        raise ValueError(f"{node['name']} ({target}) has no axis or normalized shape: {axis!r}")
    out = node.get("shape") if node.get("shape") is not None else (node.get("shapes") or [[1]])[0]
    return max(1, _numel(out))


def _summa(
    plan: TimingPlan, kid: str, rect: Rect, batch: int, m: int, k: int, n: int, word: float
) -> None:
    """SUMMA on an h x w rect: per step, A panels along rows and B panels down columns."""
    h, w = rect[2], rect[3]
    steps = summa_steps(k, w)
    rounds = min(steps, MAX_BROADCAST_ROUNDS)
    per_round = -(-steps // rounds)
    kt = -(-k // steps)
    a_words = max(1, math.ceil(batch * -(-m // h) * kt * per_round * word))
    b_words = max(1, math.ceil(batch * kt * -(-n // w) * per_round * word))
    for i in range(rounds):
        root_c, root_r = (i * per_round) % w, (i * per_round) % h
        plan.charges.append(
            Charge(kid, "broadcast", partial(_call, wse_sim.broadcast_row, rect, a_words, root_c))
        )
        plan.charges.append(
            Charge(kid, "broadcast", partial(_call, wse_sim.broadcast_col, rect, b_words, root_r))
        )


def _finish(
    plan: TimingPlan,
    graph: IrGraph,
    facts: _GraphFacts,
    rects: Mapping[str, Rect],
    whole: Rect,
    fp16: bool,
    weight_streaming: bool,
) -> None:
    """Loss (and streamed weights) back to the host, then the end-of-step barrier."""
    loss_ref = next(o["ref"] for o in graph["outputs"] if o["role"] == "loss")
    source = rects.get(facts.owner.get(loss_ref) or "", whole)
    words = 1
    if weight_streaming:
        source = whole
        words += sum(
            _words(facts.shape[o["ref"]], facts.dtype[o["ref"]], fp16)
            for o in graph["outputs"]
            if o["role"] in ("param", "opt_state")
        )
    plan.charges.append(
        Charge(
            "step",
            "host",
            partial(_call, partial(wse_sim.region_to_host, streamed=True), words, source),
        )
    )
    plan.charges.append(Charge("step", "sync", partial(_call, wse_sim.barrier, whole)))


_COUNTERS = ("clock", "busy", "words_sent", "words_received")
_TALLIES = ("wavelets_sent", "wavelets_delivered", "wavelets_dropped", "faults")


class StepCharger:
    """Charges one step's cycles to a region: the real engine on the first step (or every step
    with replay=True), the recorded per-PE deltas after that."""

    def __init__(self, plan: TimingPlan, replay: bool = False) -> None:
        self.plan, self.replay = plan, replay
        self.kernel_cycles: dict[str, dict[str, int]] = {}
        self._deltas: dict[str, Any] | None = None
        self._tallies: dict[str, int] = {}

    def charge(self, region: Region) -> int:
        """Advance `region` by one step; returns the step's simulated cycles (max clock delta)."""
        start = region.cycles
        if self._deltas is None or self.replay:
            self._record(region)
        else:
            for name, delta in self._deltas.items():
                getattr(region, name)[...] += delta
            for name, delta in self._tallies.items():
                setattr(region, name, getattr(region, name) + delta)
        return int(region.cycles - start)

    def _record(self, region: Region) -> None:
        xp = region.xp
        before = {name: xp.copy(getattr(region, name)) for name in _COUNTERS}
        tallies = {name: getattr(region, name) for name in _TALLIES}
        self.kernel_cycles = self.plan.run(region)
        self._deltas = {name: getattr(region, name) - before[name] for name in _COUNTERS}
        self._tallies = {name: getattr(region, name) - tallies[name] for name in _TALLIES}
