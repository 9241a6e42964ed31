"""The SAM-IR graph ("sam-ir/1", compiler/ir.py documents it) as the compiler writes it and the
simulator reads it: typed dicts over the JSON, so a key that is misspelt, or read as the wrong
type, is a mypy error on both sides of the artifact."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NotRequired, TypedDict

from sam_domain.json_value import JsonValue

Shape = list[int]
"""A tensor's dimensions ([] for a scalar); all static in an artifact (the compiler refuses an op
whose output size depends on the data, and checks every declared shape)."""


class IrInput(TypedDict):
    """A graph input: a parameter, buffer, optimizer state, the step, the batch or a constant."""

    name: str
    role: str  # compiler.ir.INPUT_ROLES
    shape: Shape
    dtype: str
    source_name: str  # "fc1.weight", "fc1.weight.exp_avg"


class IrNode(TypedDict):
    """One ATen call. An argument is JSON: `{"ref": name}` for a value, enums and non-finite
    floats as one-key objects; a tensor output has shape and dtype, a tuple output shapes and
    dtypes; `kernel` is the fused kernel the planner put it in."""

    name: str
    target: str
    args: list[JsonValue]
    kwargs: dict[str, JsonValue]
    shape: NotRequired[Shape | None]
    dtype: NotRequired[str | None]
    shapes: NotRequired[list[Shape | None] | None]
    dtypes: NotRequired[list[str | None] | None]
    kernel: NotRequired[str | None]
    source: NotRequired[str | None]  # the user's line that reached it
    where: NotRequired[str]  # the PyTorch call and the line that called it
    rewritable: NotRequired[bool]  # whether that line is the user's
    recompute_for: NotRequired[str]  # a copy the recompute pass made for this backward node


class IrOutput(TypedDict):
    """A graph output: the loss, a new parameter, optimizer state or buffer, or a metric."""

    role: str  # compiler.ir.OUTPUT_ROLES
    ref: str
    name: str  # "loss", the parameter's or state's source name, "found_inf"


class IrGraph(TypedDict):
    """One training step."""

    format: str
    inputs: list[IrInput]
    nodes: list[IrNode]
    outputs: list[IrOutput]


class ManifestKernel(TypedDict):
    """A fused kernel as the artifact's manifest lists it: its nodes, rectangle (row, col, rows,
    cols inside the region), FLOPs per step, resident weights and per-PE memory by category."""

    id: str
    nodes: list[str]
    op: str
    rect: list[int]
    flops: int
    weights: list[str]
    memory_per_pe: dict[str, int]
    est_cycles: int


def ref_name(value: JsonValue) -> str | None:
    """The value an argument names (`{"ref": "n3"}` -> "n3"), or None for any other argument."""
    if isinstance(value, dict) and len(value) == 1:
        ref = value.get("ref")
        if isinstance(ref, str):
            return ref
    return None


def ref_of(value: JsonValue) -> str:
    """The value an argument names; ValueError when it is not a `{"ref": name}`."""
    ref = ref_name(value)
    if ref is None:
        raise ValueError(f"expected a value reference, found {value!r}")
    return ref


def iter_refs(value: JsonValue) -> Iterator[str]:
    """Every value name an argument refers to, anywhere inside it, in order (repeats kept).
    compiler.ir keeps a twin of this and of ref_name: the trace sandbox binds no sam_domain."""
    ref = ref_name(value)
    if ref is not None:
        yield ref
    elif isinstance(value, list):
        for v in value:
            yield from iter_refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_refs(v)


def node_refs(node: IrNode) -> Iterator[str]:
    """Every value name a node's arguments (args, then kwargs) refer to, in order (repeats kept)."""
    return iter_refs([node.get("args", []), node.get("kwargs", {})])
