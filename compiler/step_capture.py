"""Capture a user's own `train_step_fn` (the seed's Runner programming model) as one pure graph.

`capture_train_step` traces `train_step_fn(model, inputs, labels, criterion, optimizer)` as the
user wrote it: zero_grad, forward, any loss composition, `loss.backward()`, gradient clipping,
`optimizer.step()` of a torch.optim optimizer and an `lr_scheduler.step()`. The result is a
`TracedStep` with the flat layout of `compiler.training_step` (params, buffers, optimizer state,
step, inputs, targets -> loss, new params, new optimizer state, buffers), so `fx_to_ir`, the
planner, the artifact and the wafer runtime take it unchanged.

How: the optimizer's state is materialized first (on a deep copy: `_init_group`'s values, the
state before the first update), then a function of flat tensors swaps fresh leaves for the
model's parameters and buffers and the optimizer's `param_groups`/`state`, calls the user's step
and returns the updated tensors. make_fx records it as it runs eagerly over fake tensors, autograd's
backward included; a second make_fx pass functionalizes and decomposes that graph to SAM's op set
(`compiler.frontend.traced_graph_module`). Scalars that torch.optim reads off 0-d tensors (Adam's
`-step_size` under a traced step count) stay tensors in the graph. A scheduler's learning rates are
a table computed eagerly up front and indexed by the step input inside the graph.

What cannot be compiled (a `.item()`/`float()`/`bool()` of a tensor, an `if` on a tensor value)
raises `DataDependentStep` naming the user's file and line before any wafer time is spent.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from compiler.batchnorm import BatchNormMode
from compiler.errors import CompileError, ModelError
from compiler.frontend import (
    TracedStep,
    _static_graph_tracing,
    _without_mkldnn,
    traced_graph_module,
)
from compiler.fx_to_ir import fx_to_ir
from compiler.lr_schedules import Schedule, idle_schedules, lr_tables, schedules_for
from compiler.opcheck import check_supported
from compiler.optimizer_state import OptimizerState, initial_optimizer_state, plain_group
from compiler.step_refusals import DataDependentStep, UserScalarReads, step_error

__all__ = ["CaptureLayout", "DataDependentStep", "capture_train_step"]

_SCALAR_READS = ("aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.item.default")


@dataclass
class CaptureLayout:
    """The (role, name) of every output of a captured step (what `fx_to_ir` labels)."""

    labels: list[tuple[str, str]]

    def output_labels(self) -> list[tuple[str, str]]:
        """(role, name) of every output, in order."""
        return self.labels


def capture_train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_step_fn: Callable[..., Any],
    loss_fn: Any,
    inputs: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray,
    *,
    scheduler: Any = None,
    scheduler_per: str | None = None,
    steps_per_epoch: int | None = None,
    total_steps: int | None = None,
    user_files: tuple[str, ...] = (),
) -> TracedStep:
    """Trace one call `train_step_fn(model, inputs, labels, loss_fn, optimizer)` into a TracedStep.

    - model, optimizer, loss_fn: the user's objects; left as they were (the trace swaps tensors
      in and restores them; the model's weights and the optimizer's state are the initial values).
    - train_step_fn: returns the loss tensor (or a tuple/list whose first item, or a dict whose
      "loss", is the loss); it is the graph's `loss` output.
    - inputs, labels: one batch (tensors or arrays); the graph is specialised to their shapes and
      dtypes. At run time the runtime feeds them as the `inputs` / `targets` inputs.
    - scheduler: a torch.optim.lr_scheduler object (not ReduceLROnPlateau), stepped once per step
      (scheduler_per="step", e.g. `scheduler.step()` inside train_step_fn) or once per epoch
      (scheduler_per="epoch", needs steps_per_epoch). None (the default): per step when
      train_step_fn calls `scheduler.step()`. Other schedulers attached to the optimizer (a
      global one the step calls) are found without being passed, and compiled in when the step
      calls them. Their learning rates for `total_steps` steps (required when the optimizer has
      a scheduler: pass it always) are computed up front; later steps keep the last one.
    - user_files: the user's file names, for source lines in the IR (default: the files of
      train_step_fn and the model's class).

    The graph's inputs are params (model.named_parameters(): a tied weight once, under its first
    name, so load the trained weights back with strict=False), buffers, optimizer state
    (role opt_state, named "<param>.<state key>", e.g. "0.weight.exp_avg" or "0.weight.step"),
    `step` (updates done before this one, fed by the runtime), `inputs`, `targets`; its outputs
    are loss, new params, new optimizer state and buffers. `TracedStep.tensors` holds the initial
    params, buffers and optimizer state by IR input name.

    Raises DataDependentStep (a `.item()`, `float()`/`bool()` of a tensor, an `if` on a tensor
    in the step; the message names the file and line), ModelError (the step raised, an
    optimizer or scheduler that cannot be compiled), UnsupportedOperator (ops with no kernel).
    """
    batch = (_as_tensor(inputs), _as_tensor(labels))
    files = tuple(user_files) or _default_user_files(model, train_step_fn)
    schedules = schedules_for(optimizer, scheduler, scheduler_per, steps_per_epoch)
    params = [(n, p) for n, p in model.named_parameters()]
    buffers = [(n, b) for n, b in model.named_buffers()]
    state = initial_optimizer_state(model, optimizer)
    flat: list[torch.Tensor] = []
    described: list[tuple[str, str]] = []
    for name, p in params:
        flat.append(p.detach().clone())
        described.append(("param", name))
    for name, b in buffers:
        flat.append(b.detach().clone())
        described.append(("buffer", name))
    state_labels = []
    for name, _ in params:
        for key, value in state.tensors.get(name, []):
            flat.append(value)
            described.append(("opt_state", f"{name}.{key}"))
            state_labels.append(("opt_state", f"{name}.{key}"))
    # .grad carried from step to step, as eager keeps it (dropped below when zero_grad clears it)
    for name, p in params:
        flat.append(torch.zeros_like(p).detach())
        described.append(("grad_acc", f"{name}.grad_acc"))
    flat += [torch.tensor(0.0), batch[0], batch[1]]
    described += [("step", "step"), ("input", "inputs"), ("target", "targets")]
    labels_out = [("loss", "loss")] + [("param", n) for n, _ in params]
    labels_out += state_labels + [("buffer", n) for n, _ in buffers]
    labels_out += [("grad_acc", f"{n}.grad_acc") for n, _ in params]
    while True:
        tables = lr_tables(optimizer, schedules, steps_per_epoch, total_steps)
        swap = _Swap(model, optimizer, params, buffers, state, schedules, tables)
        raw = _trace(swap.step_function(train_step_fn, loss_fn), flat)
        if not swap.updates:
            raise ModelError(
                "train_step_fn did not call optimizer.step() when the compiler ran it (a Python "
                "condition, e.g. on a step counter, is fixed when the step is compiled): call "
                "optimizer.step() on every step"
            )
        idle = idle_schedules(schedules, swap.scheduler_calls)
        if not idle:
            break
        # a scheduler of the optimizer that the step does not step: its lr stays as it is now
        schedules = [s for s in schedules if s not in idle]
    gm = _pure(raw, flat)
    _drop_cleared_grads(gm, flat, described, labels_out)
    graph, constants = fx_to_ir(gm, described, CaptureLayout(labels_out), files)
    check_supported(graph)
    tensors = {
        inp["name"]: t.detach().cpu().numpy().copy()
        for inp, t in zip(graph["inputs"], flat, strict=False)
        if inp["role"] in ("param", "buffer", "opt_state", "grad_acc")
    }
    tensors.update(constants)
    return TracedStep(graph=graph, tensors=tensors, fx=gm)


def _as_tensor(value: torch.Tensor | np.ndarray) -> torch.Tensor:
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise ModelError(
            f"a batch must be (inputs, labels), each one tensor; got a {type(value).__name__} "
            "(the wafer feeds one input tensor and one target tensor per step)"
        )
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return torch.from_numpy(np.ascontiguousarray(value)).clone()


def _default_user_files(model: nn.Module, train_step_fn: Callable[..., Any]) -> tuple[str, ...]:
    found = []
    code = getattr(train_step_fn, "__code__", None)
    if code is not None:
        found.append(code.co_filename)
    try:
        import inspect

        found.append(inspect.getfile(type(model)))
    except (TypeError, OSError):
        pass
    return tuple(Path(f).name for f in found if f and not f.startswith("<"))


# ---------------------------------------------------------------------------------------------
# The flat step function: user objects with traced tensors swapped in


class _Swap:
    """Swaps flat tensors into the model and optimizer for one traced call, then restores."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        params: list[tuple[str, nn.Parameter]],
        buffers: list[tuple[str, torch.Tensor]],
        opt_state: OptimizerState,
        schedules: list[Schedule],
        tables: list[torch.Tensor] | None,
    ) -> None:
        self.model, self.optimizer = model, optimizer
        self.params, self.buffers, self.state = params, buffers, opt_state.tensors
        self.created_keys = opt_state.created_keys
        self.schedules, self.tables = schedules, tables
        self.scheduler_calls: dict[int, int] = {}
        self.updates = 0

    def step_function(
        self, train_step_fn: Callable[..., Any], loss_fn: Any
    ) -> Callable[..., list[torch.Tensor]]:
        n_p, n_b = len(self.params), len(self.buffers)
        n_s = sum(len(v) for v in self.state.values())

        def step_fn(*flat: torch.Tensor) -> list[torch.Tensor]:
            leaves = [
                t.clone().requires_grad_(p.requires_grad)
                for t, (_, p) in zip(flat[:n_p], self.params, strict=True)
            ]
            buffers = [t.clone() for t in flat[n_p : n_p + n_b]]
            values = iter(t.clone() for t in flat[n_p + n_b : n_p + n_b + n_s])
            state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
            keys = [
                (leaf, k)
                for (name, _), leaf in zip(self.params, leaves, strict=True)
                for k, _ in self.state.get(name, [])
            ]
            for leaf, key in keys:
                state[leaf][key] = next(values)
            grads = flat[n_p + n_b + n_s : n_p + n_b + n_s + n_p]
            for leaf, grad in zip(leaves, grads, strict=True):
                if leaf.requires_grad:
                    leaf.grad = grad.clone()
            step, inputs, targets = flat[-3:]
            with (
                self._swapped(leaves, buffers, state, step),
                BatchNormMode(),
                UserScalarReads(),
            ):
                result = train_step_fn(self.model, inputs, targets, loss_fn, self.optimizer)
            loss = _loss_of(result)
            # read back from the state dict: an optimizer may replace a state tensor
            states = [state[leaf][key] for leaf, key in keys]
            grads_out = [
                leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves
            ]
            return [
                loss.detach(),
                *[leaf.detach() for leaf in leaves],
                *states,
                *buffers,
                *[g.detach() for g in grads_out],
            ]

        return step_fn

    @contextmanager
    def _swapped(
        self,
        leaves: list[torch.Tensor],
        buffers: list[torch.Tensor],
        new_state: defaultdict[torch.Tensor, dict[str, Any]],
        step: torch.Tensor,
    ) -> Iterator[None]:
        model, optimizer = self.model, self.optimizer
        leaf_of = {id(p): leaf for (_, p), leaf in zip(self.params, leaves, strict=True)}
        saved_slots = _set_tensors(model, "_parameters", self.params, leaves)
        saved_slots += _set_tensors(model, "_buffers", self.buffers, buffers)
        saved_groups = [dict(g) for g in optimizer.param_groups]
        saved_state = optimizer.state
        for i, group in enumerate(optimizer.param_groups):
            group["params"] = [leaf_of.get(id(p), p) for p in group["params"]]
            plain_group(group, traced=True)
            if self.tables is not None:
                group["lr"] = self._lr(self.tables[i], step)
        optimizer.state = new_state
        saved_opt_step = optimizer.__dict__.get("step")
        counted = optimizer.register_step_post_hook(self._count_update)
        if self.created_keys:
            optimizer.step = self._first_update_apart(optimizer.step, step == 0)  # type: ignore[method-assign]
        rates = [g["lr"] for g in optimizer.param_groups]
        saved_steps = [s.scheduler.__dict__.get("step") for s in self.schedules]
        for s in self.schedules:
            s.scheduler.step = self._counter(s.scheduler)
        try:
            yield
        finally:
            for s, saved_step in zip(self.schedules, saved_steps, strict=True):
                if saved_step is None:
                    s.scheduler.__dict__.pop("step", None)
                else:
                    s.scheduler.step = saved_step
            optimizer.state = saved_state
            counted.remove()
            if saved_opt_step is None:
                optimizer.__dict__.pop("step", None)
            else:
                optimizer.step = saved_opt_step  # type: ignore[method-assign]
            changed = [g["lr"] is not r for g, r in zip(optimizer.param_groups, rates, strict=True)]
            for group, saved in zip(optimizer.param_groups, saved_groups, strict=True):
                group.clear()
                group.update(saved)
            _restore_tensors(saved_slots)
            if any(changed):
                raise ModelError(
                    "the train step changed the optimizer's learning rate (an lr_scheduler.step() "
                    "the compiler was not given?); pass the scheduler to the runner so its "
                    "schedule is compiled into the step"
                )

    def _first_update_apart(
        self, update: Callable[..., Any], first: torch.Tensor
    ) -> Callable[..., Any]:
        """optimizer.step computing the first update as torch does it, apart: on copies of the
        parameters from a state without the keys it creates itself, then picked by
        torch.where(step == 0) over the update from the carried state."""
        optimizer = self.optimizer

        def step(*args: Any, **kwargs: Any) -> Any:
            groups = [g["params"] for g in optimizer.param_groups]
            carried = optimizer.state
            copies: dict[torch.Tensor, torch.Tensor] = {}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    copies[p] = p.detach().clone()
                    copies[p].grad = p.grad
                group["params"] = [copies[p] for p in group["params"]]
            fresh: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
            for p, c in copies.items():
                fresh[c] = {
                    k: v.clone() for k, v in carried[p].items() if k not in self.created_keys
                }
            optimizer.state = fresh
            try:
                update(*args, **kwargs)
            finally:
                for group, params in zip(optimizer.param_groups, groups, strict=True):
                    group["params"] = params
                optimizer.state = carried
            result = update(*args, **kwargs)
            with torch.no_grad():
                for p, c in copies.items():
                    p.copy_(torch.where(first, c, p))
                    for key, value in carried[p].items():
                        if isinstance(value, torch.Tensor) and key in fresh[c]:
                            value.copy_(torch.where(first, fresh[c][key], value))
            return result

        return step

    def _count_update(self, *args: Any) -> None:
        self.updates += 1

    def _counter(self, scheduler: Any) -> Callable[..., None]:
        """A stand-in for scheduler.step while tracing: counts the calls (the schedule itself
        is in the learning-rate table)."""

        def step(*args: Any, **kwargs: Any) -> None:
            self.scheduler_calls[id(scheduler)] = self.scheduler_calls.get(id(scheduler), 0) + 1

        return step

    @staticmethod
    def _lr(table: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
        """This update's learning rate: the table's row for the step (the last one past its
        end), picked by a one-hot sum (indexing by a 0-d tensor would read it as a Python int)."""
        index = torch.clamp(step, max=float(table.shape[0] - 1)).to(torch.float64)
        values = torch.tensor(table.tolist(), dtype=torch.float64)  # a graph constant
        positions = torch.arange(table.shape[0], dtype=torch.float64)
        return torch.where(positions == index, values, 0.0).sum()


def _set_tensors(
    model: nn.Module, slot: str, named: Sequence[tuple[str, Any]], values: list[torch.Tensor]
) -> list[tuple[dict[str, Any], str, Any]]:
    """Put `values` where the tensors of `named` are, in every module that holds one (a tied
    weight, e.g. a language model's head sharing its embedding, is held by two)."""
    replace = {id(t): value for (_, t), value in zip(named, values, strict=True)}
    saved = []
    for module in model.modules():
        table = getattr(module, slot)
        for attr, held in list(table.items()):
            if held is not None and id(held) in replace:
                saved.append((table, attr, held))
                table[attr] = replace[id(held)]
    return saved


def _restore_tensors(saved: list[tuple[dict[str, Any], str, Any]]) -> None:
    for table, attr, value in reversed(saved):
        table[attr] = value


def _loss_of(result: Any) -> torch.Tensor:
    if isinstance(result, dict):
        result = result.get("loss")
    elif isinstance(result, (tuple, list)) and result:
        result = result[0]
    if not isinstance(result, torch.Tensor) or result.numel() != 1:
        raise ModelError(
            "train_step_fn must return the loss tensor (a 1-element tensor, or a tuple or dict "
            f"with it first / under 'loss'), not {type(result).__name__}; return `loss`, "
            "not `loss.item()`"
        )
    return result.reshape(())


# ---------------------------------------------------------------------------------------------
# Tracing and the refusals


def _trace(
    step_fn: Callable[..., list[torch.Tensor]], flat: list[torch.Tensor]
) -> torch.fx.GraphModule:
    """The user's step as it ran over fake tensors (autograd's backward included), in-place
    ops and all."""
    try:
        with (
            sdpa_kernel([SDPBackend.MATH]),
            _static_graph_tracing(),
            _without_mkldnn(),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            # a tensor the step holds (a weighted loss's class weights, a global) is a constant
            raw = make_fx(
                step_fn,
                tracing_mode="fake",
                _allow_non_fake_inputs=True,
                record_stack_traces=True,
            )(*flat)
    except CompileError:
        raise
    except Exception as exc:
        raise step_error(exc) from exc
    return raw


def _pure(raw: torch.fx.GraphModule, flat: list[torch.Tensor]) -> torch.fx.GraphModule:
    """The recorded step functionalized and decomposed to SAM's op set."""
    _drop_profiler_nodes(raw)
    try:
        gm = traced_graph_module(raw, flat, real_constants=True)
    except Exception as exc:
        raise ModelError(f"functionalizing the captured step failed: {exc}") from exc
    _tensors_for_internal_scalars(gm)
    return gm


def _drop_cleared_grads(
    gm: torch.fx.GraphModule,
    flat: list[torch.Tensor],
    described: list[tuple[str, str]],
    labels: list[tuple[str, str]],
) -> None:
    """Leave out each carried gradient that the step never reads (its zero_grad() cleared it):
    its input, its output and its initial value (lists edited in place)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    cleared = {
        described[i][1]
        for i, node in enumerate(placeholders)
        if described[i][0] == "grad_acc" and not node.users
    }
    if not cleared:
        return
    output = next(n for n in gm.graph.nodes if n.op == "output")
    values = list(output.args[0])
    keep = [
        i for i, (role, name) in enumerate(labels) if not (role == "grad_acc" and name in cleared)
    ]
    output.args = ([values[i] for i in keep],)
    labels[:] = [labels[i] for i in keep]
    for i in reversed(range(len(described))):
        if described[i][0] == "grad_acc" and described[i][1] in cleared:
            gm.graph.erase_node(placeholders[i])
            del described[i], flat[i]
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _drop_profiler_nodes(gm: torch.fx.GraphModule) -> None:
    """torch.optim's record_function markers are profiler bookkeeping, not computation."""
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and str(node.target).startswith("profiler."):
            for user in list(node.users):
                gm.graph.erase_node(user)
            gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _tensors_for_internal_scalars(gm: torch.fx.GraphModule) -> None:
    """torch.optim passes some 0-d tensor results as Python scalars (Adam's `value=-step_size`
    when the step count is a tensor): use the 0-d tensor itself, in the consumer's dtype."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or str(node.target) not in _SCALAR_READS:
            continue
        source = node.args[0]
        for user in list(node.users):
            val = user.meta.get("val")
            dtype = val.dtype if isinstance(val, torch.Tensor) else source.meta["val"].dtype
            if _scaled_by(user, node):
                _fold_alpha(gm, user, node, source, dtype)
                continue
            if not _tensor_operand(user, node):
                raise ModelError(
                    f"the optimizer reads a tensor's value as a Python number for {user.target}; "
                    "this optimizer's step cannot be compiled"
                )
            with gm.graph.inserting_before(user):
                cast = gm.graph.call_function(
                    torch.ops.aten._to_copy.default, (source,), {"dtype": dtype}
                )
                cast.meta["val"] = source.meta["val"].to(dtype)
                cast.meta["stack_trace"] = node.meta.get("stack_trace")
            user.replace_input_with(node, cast)
        gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _scaled_by(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """`add(x, y, alpha=node)` / `sub(...)`: SGD's `param.add_(grad, alpha=-lr)` under a
    scheduled (tensor) learning rate."""
    return (
        str(user.target) in ("aten.add.Tensor", "aten.sub.Tensor")
        and user.kwargs.get("alpha") is node
        and node not in user.args
    )


def _fold_alpha(
    gm: torch.fx.GraphModule,
    user: torch.fx.Node,
    node: torch.fx.Node,
    source: torch.fx.Node,
    dtype: torch.dtype,
) -> None:
    """Rewrite `add(x, y, alpha=s)` as `add(x, y * s)` with s the 0-d tensor, not a number."""
    other = user.args[1]
    if not isinstance(other, torch.fx.Node):
        raise ModelError(f"cannot compile a tensor-valued alpha of {user.target} on a number")
    with gm.graph.inserting_before(user):
        cast = gm.graph.call_function(torch.ops.aten._to_copy.default, (source,), {"dtype": dtype})
        cast.meta["val"] = source.meta["val"].to(dtype)
        scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (other, cast))
        scaled.meta["val"] = other.meta["val"] * cast.meta["val"]
        for new in (cast, scaled):
            new.meta["stack_trace"] = node.meta.get("stack_trace")
    user.args = (user.args[0], scaled, *user.args[2:])
    user.kwargs = {k: v for k, v in user.kwargs.items() if k != "alpha"}


def _tensor_operand(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether every place `node` appears in `user`'s arguments takes a Tensor."""
    schema = getattr(user.target, "_schema", None)
    if schema is None:
        return False
    for arg, value in zip(schema.arguments, user.args, strict=False):
        if value is node and not isinstance(arg.type, torch.TensorType):
            return False
    for arg in schema.arguments:
        if user.kwargs.get(arg.name) is node and not isinstance(arg.type, torch.TensorType):
            return False
    return True
