"""The optimizer's state, computed eagerly before a step is captured.

`initial_optimizer_state` materializes a torch.optim optimizer's per-parameter state (the values
before its first update) so the captured graph takes them as inputs, and finds state whose first
update torch computes differently (created by the update itself). The user's objects are left
as they were.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from compiler.errors import ModelError


@dataclass
class OptimizerState:
    """The optimizer's state before the first update.

    tensors: per parameter name, its (key, initial value) pairs in key order.
    created_keys: state the first update creates itself (absent before it) where that first
    update differs from one that starts from zeros (SGD's momentum_buffer with dampening: a
    clone of the gradient, not a blend); the captured step computes the first update apart.
    """

    tensors: dict[str, list[tuple[str, torch.Tensor]]]
    created_keys: frozenset[str] = frozenset()


def initial_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> OptimizerState:
    """The optimizer's per-parameter state tensors before the first update, by parameter name.

    A deep copy of (model, optimizer) takes one update with zero gradients: the state it ends
    with names the keys; the values are those `_init_group` set up before the update (Adam's
    zeros and step 0, NAdam's mu_product 1), or zeros for state the update creates itself
    (SGD's momentum_buffer). A copy whose optimizer already has state starts from that state.
    """
    fresh = not any(optimizer.state.get(p) for g in optimizer.param_groups for p in g["params"])
    model_copy, opt_copy = copy.deepcopy((model, optimizer))
    names = {id(p): n for n, p in model_copy.named_parameters()}
    if any(opt_copy.state.get(p) for g in opt_copy.param_groups for p in g["params"]):
        before = {
            id(p): dict(opt_copy.state[p]) for g in opt_copy.param_groups for p in g["params"]
        }
        snapshot: dict[int, dict[str, Any]] = {k: _cloned(v) for k, v in before.items()}
    else:
        snapshot = {}
        original = getattr(opt_copy, "_init_group", None)
        if original is not None:

            def init_group(*args: Any, **kwargs: Any) -> object:
                result = original(*args, **kwargs)
                for group in opt_copy.param_groups:
                    for p in group["params"]:
                        if id(p) not in snapshot and opt_copy.state.get(p):
                            snapshot[id(p)] = _cloned(opt_copy.state[p])
                return result

            setattr(opt_copy, "_init_group", init_group)  # noqa: B010 (an instance override)
    for group in opt_copy.param_groups:
        plain_group(group)
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt_copy.step()
    except Exception as exc:
        raise ModelError(
            f"{type(optimizer).__name__}.step() failed when run once to set up its state "
            f"({type(exc).__name__}: {exc}); a compiled step needs an optimizer whose step() "
            "takes no closure"
        ) from exc
    state: dict[str, list[tuple[str, torch.Tensor]]] = {}
    created: set[str] = set()
    for group in opt_copy.param_groups:
        for p in group["params"]:
            entries = opt_copy.state.get(p) or {}
            initial = snapshot.get(id(p), {})
            out = []
            for key in sorted(entries):
                value = entries[key]
                if not isinstance(value, torch.Tensor):
                    raise ModelError(
                        f"{type(optimizer).__name__} keeps its state {key!r} as a Python "
                        f"{type(value).__name__}; a compiled step needs optimizer state in tensors"
                    )
                start = initial.get(key)
                start = start if isinstance(start, torch.Tensor) else torch.zeros_like(value)
                out.append((key, start.detach().clone()))
            if id(p) in names:
                state[names[id(p)]] = out
            created.update(key for key in entries if key not in initial)
    if fresh and created and _first_update_differs(model, optimizer, state):
        return OptimizerState(state, frozenset(created))
    return OptimizerState(state)


def _first_update_differs(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, list[Any]]
) -> bool:
    """Whether an update from the optimizer's own (lazy) start differs from one that starts
    from `state` (zeros for what the update creates), for the same random gradients."""
    results = []
    for prefill in (False, True):
        model_copy, opt_copy = copy.deepcopy((model, optimizer))
        gen = torch.Generator().manual_seed(0)
        by_id = {id(p): n for n, p in model_copy.named_parameters()}
        for group in opt_copy.param_groups:
            plain_group(group)
            for p in group["params"]:
                if p.requires_grad and p.is_floating_point():
                    p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)
                if prefill and id(p) in by_id:
                    opt_copy.state[p] = {k: v.clone() for k, v in state[by_id[id(p)]]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt_copy.step()
        results.append([p.detach().clone() for p in model_copy.parameters()])
    return any(not torch.equal(a, b) for a, b in zip(*results, strict=True))


def _cloned(entries: dict[str, Any]) -> dict[str, object]:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in entries.items()}


def plain_group(group: dict[str, Any], *, traced: bool = False) -> None:
    """The single-tensor implementation (what tracing records op by op, on any device); traced:
    also the capturable one, whose step counts stay tensors (RAdam's and ASGD's branches on
    them become torch.where)."""
    for key in ("foreach", "fused"):
        if key in group:
            group[key] = False if key == "foreach" else None
    if traced and "capturable" in group:
        group["capturable"] = True
