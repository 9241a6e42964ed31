"""FX GraphModule (from make_fx) -> SAM-IR JSON dict (see `compiler.ir`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.ir import FORMAT, encode_arg
from compiler.op_location import Location, node_locations

_PREFIX = {
    "param": "p",
    "buffer": "b",
    "opt_state": "s",
    "grad_acc": "g",
    "input": "x",
    "target": "y",
}
_FIXED_NAMES = {"step": "step", "input": "inputs", "target": "targets", "micro": "micro"}


def fx_to_ir(
    gm: torch.fx.GraphModule,
    described: list[tuple[str, str]],
    layout: Any,
    user_files: tuple[str, ...],
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Convert; returns (graph, constant tensors by input name). Node names become n0, n1, ..."""
    _storage_order_views(gm)
    names: dict[torch.fx.Node, str] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = _placeholder_inputs(placeholders, described, names)
    nodes: list[dict[str, Any]] = []
    constants: dict[str, np.ndarray] = {}

    def name_of(value: Any) -> str | None:
        return names.get(value) if isinstance(value, torch.fx.Node) else None

    output_node = None
    locations = node_locations(list(gm.graph.nodes), user_files, target_name)
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            inputs.append(_constant_input(gm, node, names, constants))
        elif node.op == "call_function":
            names[node] = f"n{len(nodes)}"
            nodes.append(_ir_node(node, names[node], name_of, locations.get(node)))
        elif node.op == "output":
            output_node = node
    outputs = _outputs(output_node, names, layout)
    return {"format": FORMAT, "inputs": inputs, "nodes": nodes, "outputs": outputs}, constants


def _placeholder_inputs(
    placeholders: list[torch.fx.Node],
    described: list[tuple[str, str]],
    names: dict[torch.fx.Node, str],
) -> list[dict[str, Any]]:
    """IR inputs p0.., b0.., s0.., step, inputs, targets in the step function's order."""
    counters: dict[str, int] = {}
    inputs = []
    for node, (role, source) in zip(placeholders, described, strict=True):
        index = counters.get(role, 0)
        counters[role] = index + 1
        names[node] = _FIXED_NAMES.get(role) or f"{_PREFIX[role]}{index}"
        inputs.append(
            {"name": names[node], "role": role, **_meta_shape(node), "source_name": source}
        )
    return inputs


def _constant_input(
    gm: torch.fx.GraphModule,
    node: torch.fx.Node,
    names: dict[torch.fx.Node, str],
    constants: dict[str, np.ndarray],
) -> dict[str, Any]:
    """A tensor constant captured by tracing becomes a `constant` input with its value."""
    name = f"c{len(constants)}"
    value = getattr(gm, str(node.target))
    constants[name] = value.detach().cpu().numpy().copy()
    names[node] = name
    return {
        "name": name,
        "role": "constant",
        "shape": list(value.shape),
        "dtype": _dtype(value.dtype),
        "source_name": str(node.target),
    }


def _ir_node(
    node: torch.fx.Node, name: str, name_of: Any, where: Location | None
) -> dict[str, Any]:
    """The IR node; `source` is the user's line that reached it, `where` the PyTorch call and
    the line that called it (compiler.op_location), `rewritable` whether that line is the user's."""
    args, kwargs, refused = list(node.args), dict(node.kwargs), None
    if target_name(node.target) in _AS_STRIDED:
        refused = _rebase_as_strided(node, args, kwargs)
    located: dict[str, Any] = {"source": None}
    if where is not None:
        located = {
            "source": where.site if where.in_user_code else where.user,
            "where": where.describe(),
            "rewritable": where.in_user_code,
        }
    return {
        "name": name,
        "target": target_name(node.target),
        "args": encode_arg(args, name_of),
        "kwargs": encode_arg(kwargs, name_of),
        **_meta_shape(node),
        "kernel": None,
        **located,
        **({"refused": refused} if refused else {}),
    }


# as_strided-like targets -> the position of their storage_offset argument
_AS_STRIDED = {
    "aten.as_strided.default": 3,
    "aten.as_strided_copy.default": 3,
    "aten.as_strided_scatter.default": 4,
}
_STRIDED_OUTSIDE = (
    "as_strided reads elements outside the tensor it is applied to (the rest of its base's "
    "storage), and on the wafer a tensor holds its own elements only; apply as_strided to the "
    "base tensor itself, or use slicing, view or unfold"
)
_STRIDED_VIEW = (
    "as_strided addresses the storage of a view with gaps or repeats (an expand, a strided "
    "slice), which the wafer does not keep; call .contiguous() first, or use view, permute or "
    "unfold"
)


def _storage_order_views(gm: torch.fx.GraphModule) -> None:
    """Give each as_strided whose input is dense but not contiguous (a transpose's product, which
    keeps the transposed strides) a permute of it into storage order: the permuted tensor's
    row-major elements are the input's storage, which as_strided addresses."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or target_name(node.target) not in _AS_STRIDED:
            continue
        source = node.args[0]
        value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.is_contiguous() or value.dim() < 2:
            continue
        strides = value.stride()
        order = sorted(range(value.dim()), key=lambda d: -strides[d])
        permuted = value.permute(order)
        if not permuted.is_contiguous():  # expanded or overlapping: no storage order
            continue
        with gm.graph.inserting_before(node):
            view = gm.graph.call_function(torch.ops.aten.permute.default, (source, order))
        view.meta = {**source.meta, "val": permuted}
        node.args = (view, *node.args[1:])
        if target_name(node.target) == "aten.as_strided_scatter.default":
            # the scatter's result has its input's shape: the permuted one, which the inverse
            # permute turns back into the shape eager's result has (RecurrentGemma's scan
            # writing a step into a transposed buffer)
            inverse = sorted(range(len(order)), key=lambda d: order[d])
            with gm.graph.inserting_after(node):
                back = gm.graph.call_function(torch.ops.aten.permute.default, (node, inverse))
            node.replace_all_uses_with(back, delete_user_cb=lambda user, b=back: user is not b)
            back.meta = {**node.meta}
            node.meta = {**node.meta, "val": permuted.clone()}


def _rebase_as_strided(node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """The wafer holds a tensor's elements in row-major order from 0, while as_strided's
    storage_offset and strides address its storage: for a contiguous input the offset becomes
    relative to its first element (in args/kwargs); else the reason the wafer refuses it."""
    base = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(base, torch.Tensor):
        return None
    at = _AS_STRIDED[target_name(node.target)]
    size, stride = args[at - 2], args[at - 1]
    offset = args[at] if len(args) > at else kwargs.get("storage_offset")
    start = base.storage_offset()
    relative = (start if offset is None else int(offset)) - start
    if not base.is_contiguous():
        return _STRIDED_VIEW
    if any(int(n) == 0 for n in size):
        last = relative
    else:
        last = relative + sum((int(n) - 1) * int(s) for n, s in zip(size, stride, strict=True))
    if relative < 0 or last >= max(base.numel(), 1):
        return _STRIDED_OUTSIDE
    if len(args) > at:
        args[at] = relative
    else:
        kwargs["storage_offset"] = relative
    return None


def _outputs(
    output_node: Any, names: dict[torch.fx.Node, str], layout: Any
) -> list[dict[str, Any]]:
    flat = list(torch.utils._pytree.tree_leaves(output_node.args[0]))
    return [
        {"role": role, "ref": names[v], "name": label}
        for (role, label), v in zip(layout.output_labels(), flat, strict=False)
    ]


def target_name(target: Any) -> str:
    """'aten.addmm.default' for an OpOverload, 'getitem' for operator.getitem."""
    if getattr(target, "__name__", "") == "getitem":
        return "getitem"
    return str(target)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _meta_shape(node: torch.fx.Node) -> dict[str, Any]:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return {"shape": _dims(value), "dtype": _dtype(value.dtype)}
    if isinstance(value, (tuple, list)):
        tensors = [v for v in value if isinstance(v, torch.Tensor)]
        if len(tensors) == len(value):
            return {"shapes": [_dims(v) for v in value], "dtypes": [_dtype(v.dtype) for v in value]}
    return {"shape": None, "dtype": None}


def _dims(value: torch.Tensor) -> list[int | None]:
    """Static sizes; a data-dependent size (an unbacked SymInt, e.g. after nonzero) is None."""
    return [d if isinstance(d, int) else None for d in value.shape]
