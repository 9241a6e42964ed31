"""Checking a graph against SUPPORTED_OPS, and finding unsupported ops when tracing fails.

Every violation is collected and raised at once as one `UnsupportedOperator` whose details list
each op with its input shapes, the user's source line and a rewrite suggestion.
"""

from __future__ import annotations

import traceback
from typing import Any

from compiler.errors import UnsupportedOperator
from compiler.op_location import Frame, Location, locate
from compiler.ops import SUPPORTED_OPS, hint_for

MASK_INDEX = (
    "indexing with a boolean mask (x[mask]) selects a number of elements that depends on the "
    "mask's values, and a wafer program has static shapes; keep the shape and zero the rest: "
    "torch.where(mask, x, 0) or x * mask (then sum, or divide by mask.sum() for a mean)"
)
_INDEX_OPS = frozenset({"aten.index.Tensor", "aten._unsafe_index.Tensor"})


def check_supported(graph: dict[str, Any]) -> None:
    """Raise UnsupportedOperator listing every node whose target is not in SUPPORTED_OPS, or
    that the wafer refuses for its arguments (a boolean mask index; a node `fx_to_ir` marked
    `refused`, with the reason)."""
    shapes = {i["name"]: i.get("shape") for i in graph["inputs"]}
    dtypes = {i["name"]: i.get("dtype") for i in graph["inputs"]}
    found: list[dict[str, Any]] = []
    refused = False
    for node in graph["nodes"]:
        shapes[node["name"]] = node.get("shape")
        dtypes[node["name"]] = node.get("dtype")
        reason = node.get("refused") or _refusal(node, dtypes)
        if node["target"] in SUPPORTED_OPS and not reason:
            continue
        refused = refused or bool(reason)
        arg_shapes = [shapes.get(a["ref"]) for a in _top_refs(node["args"])]
        found.append(
            _violation(
                node["target"],
                arg_shapes,
                node.get("source"),
                node.get("where"),
                bool(node.get("rewritable", node.get("source") is not None)),
                reason,
            )
        )
    if refused:  # the size queries of a data-dependent shape follow from the refused op
        found = [f for f in found if not f["op"].startswith("aten.sym_")]
    aten = [f for f in found if f["op"].startswith("aten.")]
    if found:
        # Python-level shape arithmetic (SymInt mul/add) only matters when nothing else explains it.
        raise unsupported_error(aten or found)


def _refusal(node: dict[str, Any], dtypes: dict[str, Any]) -> str | None:
    """Why the wafer refuses this node for its arguments (None: it does not)."""
    if node["target"] in _INDEX_OPS and len(node["args"]) > 1:
        indices = node["args"][1] if isinstance(node["args"][1], list) else []
        refs = [str(i["ref"]) for i in indices if isinstance(i, dict) and "ref" in i]
        sized = None not in (node.get("shape") or [])  # a constant mask can give a static size
        if not sized and any(dtypes.get(ref) in ("bool", "uint8") for ref in refs):
            return MASK_INDEX
    return None


def _top_refs(args: list[Any]) -> list[dict[str, str]]:
    refs = []
    for a in args:
        if isinstance(a, dict) and "ref" in a:
            refs.append(a)
        elif isinstance(a, list):
            refs.extend(x for x in a if isinstance(x, dict) and "ref" in x)
    return refs


def _violation(
    target: str,
    shapes: list[Any],
    source: str | None,
    where: str | None,
    rewritable: bool,
    refusal: str | None = None,
) -> dict[str, Any]:
    """One unsupported op: `source` the user's line that reached it, `where` the PyTorch call
    and the line (maybe a library's) that called it; the suggestion offers an alternative only
    where the user can rewrite the call (their own line), else it gives the reason alone.
    `refusal`: why the wafer refuses this call ('reason; alternative'), for an op it has."""
    hint: str | None
    if not target.startswith("aten.") and target != "getitem":
        hint = (
            "Python arithmetic on a data-dependent size; keep shapes static" if rewritable else None
        )
    else:
        reason, alternative = hint_for(target)
        if refusal:
            reason, _, alternative = refusal.partition("; ")
        parts = [reason, alternative if rewritable else None]
        hint = "; ".join(p for p in parts if p) or None
    return {
        "op": target,
        "input_shapes": shapes,
        "source": source or where or "backward pass",
        "where": where or source or "the backward pass",
        "suggestion": hint,
    }


def unsupported_error(found: list[dict[str, Any]]) -> UnsupportedOperator:
    """One error naming every distinct (op, source line) pair."""
    unique: dict[tuple[str, str | None], dict[str, Any]] = {}
    for item in found:
        unique.setdefault((item["op"], item["where"]), item)
    items = list(unique.values())
    lines = []
    for item in items:
        hint = f" - {item['suggestion']}" if item["suggestion"] else ""
        lines.append(f"  {item['op']}: {item['where']} (inputs {item['input_shapes']}){hint}")
    message = (
        f"the training step uses {len(items)} operator(s) the wafer cannot run; "
        "rewrite them:\n" + "\n".join(lines)
    )
    return UnsupportedOperator(message, {"ops": items})


def scan_unsupported_eagerly(
    step_fn: Any, flat: list[Any], user_files: tuple[str, ...], cause: BaseException
) -> None:
    """Run step_fn once on real tensors recording every ATen op; raise if any is unsupported.

    Used when make_fx fails (data-dependent ops such as nonzero stop fake tracing). Returns
    normally when every recorded op is supported, so the caller reports the original failure.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    found: list[dict[str, Any]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            name = str(func)
            if name not in SUPPORTED_OPS and not _is_benign(name):
                shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
                where = _live_location(user_files, name)
                if where is None:
                    found.append(_violation(name, shapes, None, None, False))
                else:
                    user = where.site if where.in_user_code else where.user
                    found.append(
                        _violation(name, shapes, user, where.describe(), where.in_user_code)
                    )
            return func(*args, **(kwargs or {}))

    try:
        # TorchDispatchMode's __init__ is untyped in torch, so Recorder() is an untyped call
        with Recorder():  # type: ignore[no-untyped-call]
            step_fn(*[t.clone() for t in flat])
    except Exception:
        pass  # the recorder has what it saw up to the failure
    if found:
        raise unsupported_error(found) from cause


def _is_benign(name: str) -> bool:
    """Ops seen eagerly that tracing turns into supported ones (in-place forms, decomposable ops,
    allocation and view bookkeeping)."""
    from compiler.ops import decomposable_op_names

    functional = name.replace("_.", ".", 1) if "_." in name else name
    base = name.split(".")[1] if name.count(".") >= 2 else name
    return functional in SUPPORTED_OPS or name in decomposable_op_names() or base in _BOOKKEEPING


_BOOKKEEPING = frozenset(
    {
        "detach",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "new_zeros",
        "new_ones",
        "lift_fresh",
        "lift",
        "as_strided",
        "_reshape_alias",
        "copy_",
        "fill_",
        "zero_",
        "set_",
    }
)


def _live_location(user_files: tuple[str, ...], op: str) -> Location | None:
    """The Location of the op being dispatched now, from the Python stack below the outermost
    `forward` (None outside a forward: the loss or the backward pass)."""
    stack = traceback.extract_stack()
    start = next((i for i, f in enumerate(stack) if f.name == "forward"), None)
    if start is None:
        return None
    frames = [Frame(f.filename, f.lineno or 0, f.name, f.line or "") for f in stack[start:]]
    return locate(frames, user_files, op)
