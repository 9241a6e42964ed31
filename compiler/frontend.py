"""Front end: trace a whole training step (forward, loss, backward, optimizer) to SAM-IR.

`trace_training_step(spec, files)` builds the model (`torch.manual_seed(seed); Net(**kwargs)`),
writes the step as one function of flat tensors, traces it with make_fx over fake tensors (a
functionalized function that calls `torch.autograd.grad`), decomposes to `compiler.ops`' op set and
converts the FX graph to the JSON IR of `compiler.ir`. It runs user code: outside tests it is only
called in the sandbox child (`compiler.sandbox.child`) for every job; in-process only by trusted
callers (tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from compiler import ops
from compiler.autograd_functions import custom_functions
from compiler.data import normalize_batch, synthetic_batch
from compiler.errors import ModelError
from compiler.fx_to_ir import fx_to_ir
from compiler.model_factory import DEFAULT_FACTORY_PACKAGES
from compiler.model_source import build_model, load_batch_function
from compiler.op_location import backward_seq_nr, full_stack_traces
from compiler.opcheck import check_supported, scan_unsupported_eagerly
from compiler.training_step import StepLayout, initial_inputs, make_step_function
from compiler.user_code import user_code_error


@dataclass
class TracedStep:
    """A traced training step: the IR graph, initial tensors by IR input name, and the FX graph."""

    graph: dict[str, Any]
    tensors: dict[str, np.ndarray]
    fx: torch.fx.GraphModule | None = None


def example_batch(
    spec: dict[str, Any], files: dict[str, str] | None, source_dir: Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Step 0's batch, whose shapes and dtypes the graph is specialised to. A job naming a data
    set is compiled from its declared task and input_shape: the compile sandbox never sees the
    data set (its frames are checked against the same declaration at run time)."""
    data = spec["data"]
    if (
        data.get("source", "synthetic") == "synthetic"
        or data.get("dataset")
        or data.get("datasets")
    ):
        return synthetic_batch(spec, 0)
    make_batch = load_batch_function(spec, files or {}, source_dir)
    try:
        return normalize_batch(make_batch(0, int(spec["data"]["batch_size"])))
    except Exception as exc:
        raise user_code_error("calling make_batch(0, batch_size)", exc) from exc


def trace_training_step(
    spec: dict[str, Any],
    files: dict[str, str] | None = None,
    *,
    source_dir: Path | None = None,
    source_files: tuple[str, ...] = (),
    factory_packages: Sequence[str] = DEFAULT_FACTORY_PACKAGES,
) -> TracedStep:
    """Trace spec's training step to SAM-IR; raises ModelError / UnsupportedOperator on bad models.
    A model.factory may name a callable of `factory_packages` or of the job's own project."""
    model = build_model(spec, files, source_dir, factory_packages)
    batch = example_batch(spec, files, source_dir)
    layout = StepLayout.for_spec(spec, model)
    flat, described = initial_inputs(model, layout, micro_batch(batch, layout.micro_batches))
    step_fn = make_step_function(model, layout)
    user_files = tuple(source_files) or tuple((files or {}).keys())
    gm = _trace(step_fn, flat, user_files)
    graph, constants = fx_to_ir(gm, described, layout, user_files)
    check_supported(graph)
    tensors = {
        inp["name"]: _to_numpy(t)
        for inp, t in zip(graph["inputs"], flat, strict=False)
        if inp["role"] in ("param", "buffer", "opt_state", "grad_acc")
    }
    tensors.update(constants)
    return TracedStep(graph=graph, tensors=tensors, fx=gm)


def _trace(
    step_fn: Callable[..., list[torch.Tensor]],
    flat: list[torch.Tensor],
    user_files: tuple[str, ...],
) -> torch.fx.GraphModule:
    try:
        return traced_graph_module(step_fn, flat)
    except ModelError:
        raise
    except Exception as exc:
        # Data-dependent ops (nonzero, .item(), boolean masks) stop make_fx before a graph exists:
        # run the step eagerly once under an op recorder so the error lists every such op.
        scan_unsupported_eagerly(step_fn, flat, user_files, cause=exc)
        raise user_code_error("tracing the training step", exc) from exc


def traced_graph_module(
    fn: Callable[..., list[torch.Tensor]],
    flat: list[torch.Tensor],
    *,
    real_constants: bool = False,
) -> torch.fx.GraphModule:
    """fn(*flat) functionalized and traced over fake tensors to SAM's op set (the step's trace;
    benchmarks/op_coverage.py traces single ops with it too). real_constants: fn may hold real
    tensors (a graph module's constants), which become constants of the trace."""
    functional = torch.func.functionalize(fn, remove="mutations")
    with (
        sdpa_kernel([SDPBackend.MATH]),
        _static_graph_tracing(),
        # eager's CPU backend choices (mkldnn_rnn_layer for nn.LSTM/GRU) are not the model's
        # ops: without mkldnn the RNN decomposes to matmuls and pointwise ops
        _without_mkldnn(),
        custom_functions(),
        # backward nodes keep their forward node's seq_nr: errors locate them (op_location)
        backward_seq_nr(),
        full_stack_traces(),
    ):
        return make_fx(
            functional,
            decomposition_table=ops.decomposition_table(),
            tracing_mode="fake",
            _allow_non_fake_inputs=real_constants,
            record_stack_traces=True,
        )(*flat)


def micro_batch(batch: tuple[np.ndarray, np.ndarray], count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first of `count` equal micro-batches of `batch` (the shapes one micro-step sees)."""
    if count <= 1:
        return batch
    size = batch[0].shape[0] // count
    return batch[0][:size], batch[1][:size]


@contextmanager
def _without_mkldnn() -> Iterator[None]:
    """mkldnn off while tracing (only the enabled flag: `torch.backends.mkldnn.flags` resets the
    TF32 flag too, which warns on every trace)."""
    saved = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(saved)


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
    """A state tensor as numpy; bfloat16 (which numpy lacks, RecurrentGemma's `normalizer`
    buffer) as its exact float32 values, the form the runtime holds bfloat16 in."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.detach().cpu().numpy().copy()
