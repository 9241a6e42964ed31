"""Front end: trace a whole training step (forward, loss, backward, optimizer) to SAM-IR.

`trace_training_step(spec, files)` builds the model (`torch.manual_seed(seed); Net(**kwargs)`),
writes the step as one function of flat tensors, traces it with make_fx over fake tensors (a
functionalized function that calls `torch.autograd.grad`), decomposes to `compiler.ops`' op set and
converts the FX graph to the JSON IR of `compiler.ir`. It runs user code: outside tests it is only
called in the sandbox child, or in-process for built-in models.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from compiler import ops
from compiler.data import normalize_batch, synthetic_batch
from compiler.errors import ModelError
from compiler.fx_to_ir import fx_to_ir
from compiler.model_source import build_model, load_batch_function
from compiler.opcheck import check_supported, scan_unsupported_eagerly
from compiler.training import OptimizerConfig, compute_loss, functional_update
from compiler.user_code import user_code_error


@dataclass
class TracedStep:
    """A traced training step: the IR graph, initial tensors by IR input name, and the FX graph."""

    graph: dict[str, Any]
    tensors: dict[str, np.ndarray]
    fx: torch.fx.GraphModule | None = None


@dataclass
class StepLayout:
    """How the flat inputs and outputs of the step function map to model state."""

    param_names: list[str]
    buffer_names: list[str]
    state_names: list[str]
    loss_kind: str
    optimizer: OptimizerConfig


def example_batch(
    spec: dict[str, Any], files: dict[str, str] | None, source_dir: Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Step 0's batch, whose shapes and dtypes the graph is specialised to."""
    if spec["data"].get("source", "synthetic") == "synthetic":
        return synthetic_batch(spec, 0)
    make_batch = load_batch_function(spec, files or {}, source_dir)
    try:
        return normalize_batch(make_batch(0, int(spec["data"]["batch_size"])))
    except Exception as exc:
        raise user_code_error("calling make_batch(0, batch_size)", exc) from exc


def make_step_function(model: nn.Module, layout: StepLayout):
    """The training step as a function of flat tensors -> [loss, *params, *state, *buffers]."""
    n_p, n_b = len(layout.param_names), len(layout.buffer_names)
    n_s = len(layout.state_names)

    def step_fn(*flat: torch.Tensor) -> list[torch.Tensor]:
        params = list(flat[:n_p])
        states = list(flat[n_p + n_b : n_p + n_b + n_p * n_s])
        step, inputs, targets = flat[-3:]
        args = (inputs, targets) if layout.loss_kind == "model" else (inputs,)

        def loss_of(trainable: list[torch.Tensor]):
            buffers = [b.clone() for b in flat[n_p : n_p + n_b]]
            state_dict = {
                **dict(zip(layout.param_names, trainable, strict=False)),
                **dict(zip(layout.buffer_names, buffers, strict=False)),
            }
            output = torch.func.functional_call(model, state_dict, args)
            loss = compute_loss(layout.loss_kind, output, targets)
            return loss, (loss, buffers)

        grads, (loss, buffers) = torch.func.grad(loss_of, has_aux=True)(params)
        new_params, new_states = [], []
        for i, (param, grad) in enumerate(zip(params, grads, strict=False)):
            old_state = states[i * n_s : (i + 1) * n_s]
            p, s = functional_update(layout.optimizer, param, grad, old_state, step)
            new_params.append(p)
            new_states.extend(s)
        return [loss, *new_params, *new_states, *buffers]

    return step_fn


def initial_inputs(model: nn.Module, layout: StepLayout, batch: tuple[np.ndarray, np.ndarray]):
    """(flat input tensors, IR input descriptors without names) in the step function's order."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    flat: list[torch.Tensor] = []
    described: list[tuple[str, str]] = []
    for name in layout.param_names:
        flat.append(params[name].detach().clone())
        described.append(("param", name))
    for name in layout.buffer_names:
        flat.append(buffers[name].detach().clone())
        described.append(("buffer", name))
    for name in layout.param_names:
        for state in layout.state_names:
            flat.append(torch.zeros_like(params[name]).detach())
            described.append(("opt_state", f"{name}.{state}"))
    flat += [torch.tensor(0.0), torch.from_numpy(batch[0]), torch.from_numpy(batch[1])]
    described += [("step", "step"), ("input", "inputs"), ("target", "targets")]
    return flat, described


def trace_training_step(
    spec: dict[str, Any],
    files: dict[str, str] | None = None,
    *,
    source_dir: Path | None = None,
    source_files: tuple[str, ...] = (),
) -> TracedStep:
    """Trace spec's training step to SAM-IR; raises ModelError / UnsupportedOperator on bad models."""
    model = build_model(spec, files, source_dir)
    batch = example_batch(spec, files, source_dir)
    layout = StepLayout(
        param_names=[n for n, _ in model.named_parameters()],
        buffer_names=[n for n, _ in model.named_buffers()],
        state_names=OptimizerConfig.from_spec(spec["train"]["optimizer"]).state_names(),
        loss_kind=spec["train"].get("loss", "cross_entropy"),
        optimizer=OptimizerConfig.from_spec(spec["train"]["optimizer"]),
    )
    flat, described = initial_inputs(model, layout, batch)
    step_fn = make_step_function(model, layout)
    user_files = tuple(source_files) or tuple((files or {}).keys())
    gm = _trace(step_fn, flat, user_files)
    graph, constants = fx_to_ir(gm, described, layout, user_files)
    check_supported(graph)
    tensors = {
        inp["name"]: _to_numpy(t)
        for inp, t in zip(graph["inputs"], flat, strict=False)
        if inp["role"] in ("param", "buffer", "opt_state")
    }
    tensors.update(constants)
    return TracedStep(graph=graph, tensors=tensors, fx=gm)


def _trace(step_fn, flat: list[torch.Tensor], user_files: tuple[str, ...]) -> torch.fx.GraphModule:
    functional = torch.func.functionalize(step_fn, remove="mutations")
    try:
        with sdpa_kernel([SDPBackend.MATH]), _static_graph_tracing():
            return make_fx(
                functional,
                decomposition_table=ops.decomposition_table(),
                tracing_mode="fake",
                record_stack_traces=True,
            )(*flat)
    except ModelError:
        raise
    except Exception as exc:
        # Data-dependent ops (nonzero, .item(), boolean masks) stop make_fx before a graph exists:
        # run the step eagerly once under an op recorder so the error lists every such op.
        scan_unsupported_eagerly(step_fn, flat, user_files, cause=exc)
        raise user_code_error("tracing the training step", exc) from exc


@contextmanager
def _static_graph_tracing() -> Iterator[None]:
    """Tell model libraries a static graph is being traced, as torch.export's non-strict mode does.

    Libraries such as transformers skip data-dependent shortcuts (`if mask.all(): ...`) when
    `torch.compiler.is_compiling()` is true; under make_fx those shortcuts would stop tracing.
    """
    import torch.compiler as tc

    saved = getattr(tc, "_is_compiling_flag", False), getattr(tc, "_is_exporting_flag", False)
    tc._is_compiling_flag = tc._is_exporting_flag = True
    try:
        yield
    finally:
        tc._is_compiling_flag, tc._is_exporting_flag = saved


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().copy()
