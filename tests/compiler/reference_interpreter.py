"""A tiny SAM-IR interpreter that runs every node with the real ATen op (the test oracle)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

from compiler.ir import decode_arg


def resolve_op(target: str) -> Any:
    """'aten.addmm.default' -> torch.ops.aten.addmm.default; 'getitem' -> operator.getitem."""
    if target == "getitem":
        return operator.getitem
    namespace, name, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def run_graph(graph: dict[str, Any], values: dict[str, np.ndarray]) -> dict[str, list]:
    """Execute one step; `values` maps every IR input name to an array. Returns outputs by role,
    each a list of (name, ndarray)."""
    env: dict[str, Any] = {k: torch.from_numpy(np.array(v)) for k, v in values.items()}
    for node in graph["nodes"]:
        args = decode_arg(node["args"], env, to_torch=True)
        kwargs = decode_arg(node["kwargs"], env, to_torch=True)
        env[node["name"]] = resolve_op(node["target"])(*args, **kwargs)
    result: dict[str, list] = {}
    for out in graph["outputs"]:
        result.setdefault(out["role"], []).append((out["name"], env[out["ref"]].numpy()))
    return result


def run_steps(
    graph: dict[str, Any], init: dict[str, np.ndarray], batches: list
) -> tuple[list, dict]:
    """Run len(batches) training steps; returns (losses, final params by source name)."""
    state = dict(init)
    by_source = {i["source_name"]: i["name"] for i in graph["inputs"]}
    losses = []
    for k, (x, y) in enumerate(batches):
        feed = dict(state, step=np.array(k, dtype=np.float32), inputs=x, targets=y)
        out = run_graph(graph, feed)
        losses.append(float(out["loss"][0][1]))
        for role in ("param", "opt_state", "buffer"):
            for name, value in out.get(role, []):
                state[by_source[name]] = value
    params = {i["source_name"]: state[i["name"]] for i in graph["inputs"] if i["role"] == "param"}
    return losses, params
