"""Core ATen op coverage on the wafer, driven by PyTorch's OpInfo database.

For every operator name of the Core ATen opset (`compiler.core_ops.core_op_names`), the OpInfo
entries that exercise it give sample inputs. Each sample is traced the way the front end traces
a training step (make_fx over fake tensors with SAM's decomposition table, functionalized), the
graph goes through `fx_to_ir` and runs on the wafer runtime's kernels (`wse_sim.runtime`), and
its outputs are compared with eager PyTorch on the CPU; then the vector-Jacobian product (the
gradients a training step needs) is traced, run and compared the same way. A sample counts for a
core op when eager dispatches one of that op's core overloads while running it (forward or
backward), so the backward kernels (convolution_backward, native_layer_norm_backward...) are
measured through the gradients of their forward ops.

Where the wafer and eager fp32 differ, eager runs the sample again in float64 (the same inputs,
cast), and the wafer's values count as matching when they are within the same tolerance of
those: eager fp32 is then the one off, by its own rounding (a layer norm over one element, where
x - mean is 0 exactly and eager's vectorized mean leaves 1e-7 that rstd = 1/sqrt(eps) scales up;
a bicubic grid gradient summing 16 taps with cancellation). `SampleResult.by_float64` says which
samples needed it, and the table shows them.

Shared by `benchmarks/op_coverage.py` (all samples) and `tests/compiler/test_op_coverage.py` (one
sample per op).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from compiler import ops
from compiler.core_ops import REFUSED, core_op_names
from compiler.errors import UnsupportedOperator
from compiler.fx_to_ir import fx_to_ir, target_name
from compiler.opcheck import check_supported
from wse_sim.runtime.program import compile_program

RTOL = 1e-3
ATOL = 1e-5

# Core operator names whose OpInfo entries go by another name (the functional API's), besides
# entries named like the op itself. Backward ops are measured through their forward's gradients.
OPINFO_NAMES: dict[str, tuple[str, ...]] = {
    "_adaptive_avg_pool2d": ("nn.functional.adaptive_avg_pool2d",),
    "_adaptive_avg_pool2d_backward": ("nn.functional.adaptive_avg_pool2d",),
    "_adaptive_avg_pool3d": ("nn.functional.adaptive_avg_pool3d",),
    "adaptive_avg_pool1d": ("nn.functional.adaptive_avg_pool1d",),
    "_cdist_forward": ("cdist",),
    "_embedding_bag": ("nn.functional.embedding_bag",),
    "_fft_r2c": ("fft.rfft",),
    "_fft_c2r": ("fft.irfft",),
    "_local_scalar_dense": ("item",),
    "_log_softmax": ("log_softmax",),
    "_softmax": ("softmax",),
    "_native_batch_norm_legit_no_training": ("nn.functional.batch_norm",),
    "_pdist_forward": ("nn.functional.pdist",),
    "_to_copy": ("double", "float", "long"),
    "avg_pool2d_backward": ("nn.functional.avg_pool2d",),
    "col2im": ("nn.functional.fold",),
    "convolution": ("nn.functional.conv1d", "nn.functional.conv2d"),
    "convolution_backward": ("nn.functional.conv1d", "nn.functional.conv2d"),
    "elu": ("nn.functional.elu",),
    "embedding": ("nn.functional.embedding",),
    "embedding_dense_backward": ("nn.functional.embedding",),
    "index": ("__getitem__",),
    "max_pool2d_with_indices": ("nn.functional.max_pool2d",),
    "max_pool2d_with_indices_backward": ("nn.functional.max_pool2d",),
    "max_pool3d_with_indices": ("nn.functional.max_pool3d",),
    "native_dropout": ("nn.functional.dropout",),
    "native_group_norm": ("nn.functional.group_norm",),
    "native_group_norm_backward": ("nn.functional.group_norm", "native_group_norm"),
    "native_layer_norm": ("nn.functional.layer_norm",),
    "native_layer_norm_backward": ("nn.functional.layer_norm", "native_layer_norm"),
    "reflection_pad1d": ("nn.functional.pad",),
    "reflection_pad2d": ("nn.functional.pad",),
    "reflection_pad3d": ("nn.functional.pad",),
    "replication_pad2d": ("nn.functional.pad",),
    "replication_pad3d": ("nn.functional.pad",),
    "upsample_bilinear2d": ("nn.functional.interpolate",),
    "upsample_nearest2d": ("nn.functional.interpolate",),
    "copy": ("clone",),
    "alias": ("view_as",),
}
# Ops whose values are random by definition: the wafer draws from its own (seed, step) stream,
# so a sample can only be checked for support, never against eager's numbers.
RANDOM_OPS = frozenset({"native_dropout", "rand", "randn", "randperm", "bernoulli"})
# Ops whose values are undefined (uninitialised memory): only shapes and dtypes are compared.
UNDEFINED_VALUES = frozenset({"empty", "empty_strided", "new_empty", "empty_like"})


@dataclass
class SampleResult:
    """One sample of one OpInfo: which core ops it exercised and how the wafer did."""

    core: set[str]
    unsupported: list[str] = field(default_factory=list)
    fwd: bool | None = None  # None: not compared (random op, or tracing stopped)
    bwd: bool | None = None  # None: nothing differentiable
    why: str | None = None
    by_float64: bool = False  # matched eager float64 where eager fp32 is off by its rounding
    refused: str | None = None  # the compiler refused this call with this reason
    skipped: str | None = None  # a sample no training step can pose (why)


@dataclass
class OpCoverage:
    """The verdict on one core operator name over the samples that exercised it."""

    name: str
    overloads: list[str]
    samples: int = 0
    supported: bool = False
    fwd_match: bool = False
    bwd_match: bool = False
    bwd_samples: int = 0
    refused: str | None = None
    why: str | None = None
    by_float64: int = 0  # samples that matched eager float64, not eager fp32 (its rounding)
    refused_samples: int = 0  # samples the compiler refuses for their arguments, with the reason
    refused_why: str | None = None
    skipped_samples: int = 0  # samples no training step can pose (a view input into a larger base)


def core_ops_by_name() -> dict[str, list[str]]:
    """Core operator name -> its core overloads ('add' -> ['aten.add.Scalar', 'aten.add.Tensor'])."""
    names: dict[str, list[str]] = {}
    for full in core_op_names():
        names.setdefault(full.split(".")[1], []).append(full)
    return names


def opinfos_for(name: str, db: list[Any]) -> list[Any]:
    """The OpInfo entries that exercise core op `name` (by their own name, aten_name or alias)."""
    wanted = {name, *OPINFO_NAMES.get(name, ())}
    return [op for op in db if op.name in wanted or op.aten_name == name]


def statically_supported(overload: str) -> bool:
    """The wafer has a kernel for `overload`, or the front end decomposes it (out= overloads
    never reach a functionalized graph)."""
    if overload.rsplit(".", 1)[-1].endswith("out"):
        return True
    return overload in ops.SUPPORTED_OPS or overload in ops.decomposable_op_names()


def implicit(overloads: list[str]) -> bool:
    """Every functional overload is CompositeImplicitAutograd: PyTorch decomposes it before any
    tracer (or the eager recorder) sees it, so its OpInfo samples count without dispatching it."""
    functional = [o for o in overloads if not o.rsplit(".", 1)[-1].endswith("out")]
    return bool(functional) and all(
        torch._C._dispatch_has_kernel_for_dispatch_key(
            o.replace("aten.", "aten::", 1).removesuffix(".default"), "CompositeImplicitAutograd"
        )
        for o in functional
    )


class _Recorder(TorchDispatchMode):
    """Records the ATen overloads eager dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen.add(str(func))
        return func(*args, **(kwargs or {}))


def sample_dtype(op: Any) -> torch.dtype | None:
    """float32 where the op takes it, else int64 or bool (bitwise and logical ops)."""
    supported = op.supported_dtypes("cpu")
    for dtype in (torch.float32, torch.int64, torch.bool):
        if dtype in supported:
            return dtype
    return None


def samples(op: Any, limit: int | None) -> Iterator[tuple[Any, torch.dtype]]:
    """Up to `limit` samples of `op` (all with None), with gradients where the op has them."""
    dtype = sample_dtype(op)
    if dtype is None:
        return
    grad = bool(op.supports_autograd) and dtype.is_floating_point
    for count, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=grad)):
        if limit is not None and count >= limit:
            return
        yield sample, dtype


def _flatten(sample: Any) -> tuple[list[torch.Tensor], Callable[[list[torch.Tensor]], Any]]:
    """The sample's tensors, and a function rebuilding (input, args, kwargs) from new tensors."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def rebuild(tensors: list[torch.Tensor]) -> Any:
        values = list(leaves)
        for slot, tensor in zip(slots, tensors, strict=True):
            values[slot] = tensor
        return tree_unflatten(values, spec)

    return [leaves[i] for i in slots], rebuild


def _tensor_outputs(value: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(value)[0] if isinstance(v, torch.Tensor)]


class _Layout:
    """fx_to_ir's view of an op graph: the first output doubles as the (unused) loss."""

    def __init__(self, outputs: int) -> None:
        self.outputs = outputs

    def output_labels(self) -> list[tuple[str, str]]:
        return [("loss", "loss")] + [("metric", f"out{i}") for i in range(self.outputs)]


def run_on_wafer(
    fn: Callable[..., list[torch.Tensor]], inputs: list[torch.Tensor]
) -> tuple[list[np.ndarray] | None, list[str]]:
    """Trace fn(*inputs) as the front end does and run it on the runtime's kernels.

    Returns (outputs, []) or (None, the ops without a wafer kernel); raises the compiler's
    UnsupportedOperator where it refuses a call for its arguments (a boolean mask index)."""
    from compiler.frontend import traced_graph_module

    def with_loss(*args: torch.Tensor) -> list[torch.Tensor]:
        outs = fn(*args)
        return [outs[0], *outs]

    gm = traced_graph_module(with_loss, [t.detach() for t in inputs])
    targets = [target_name(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    missing = sorted({t for t in targets if t not in ops.SUPPORTED_OPS})
    if missing:
        return None, missing
    count = len([n for n in gm.graph.nodes if n.op == "output"][0].args[0]) - 1
    described = [("param", f"in{i}") for i in range(len(inputs))]
    graph, constants = fx_to_ir(gm, described, _Layout(count), ())
    check_supported(graph)
    program = compile_program(graph, lambda _: (0, 0, 4, 4), fp16=False, seed=0, step_of=lambda: 0)
    env = program.new_env()
    for inp in graph["inputs"]:
        if inp["role"] == "param":
            value = inputs[int(inp["source_name"][2:])].detach().numpy()
        else:
            value = constants[inp["name"]]
        env[program.input_slots[inp["name"]]] = np.asarray(value)
    for run in program.runs:
        run(env)
    return [np.asarray(env[program.metric_slots[f"out{i}"]]) for i in range(count)], []


def close(ours: list[np.ndarray], want: list[torch.Tensor]) -> str | None:
    """None when every output matches eager (rtol RTOL), else what differs."""
    if len(ours) != len(want):
        return f"{len(ours)} outputs instead of {len(want)}"
    for i, (a, b) in enumerate(zip(ours, want, strict=True)):
        ref = b.detach().numpy()
        if a.shape != ref.shape:
            return f"output {i} has shape {list(a.shape)} instead of {list(ref.shape)}"
        x, y = a.astype(np.float64), ref.astype(np.float64)
        if not np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True):
            worst = float(np.nanmax(np.abs(x - y) / np.maximum(np.abs(y), ATOL / RTOL)))
            return f"output {i} differs from eager by {worst:.2e} (relative)"
    return None


@dataclass
class EagerRun:
    """One sample run eagerly: its tensors, outputs, gradients and the core ops it dispatched."""

    forward: Callable[..., list[torch.Tensor]]
    tensors: list[torch.Tensor]
    want: list[torch.Tensor]
    core: set[str]
    diff: list[int] = field(default_factory=list)
    cotangents: list[torch.Tensor] = field(default_factory=list)
    grads: list[torch.Tensor] = field(default_factory=list)
    grad_of: Callable[..., list[torch.Tensor]] | None = None

    def in_float64(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The sample's outputs and gradients in float64 (floating inputs and cotangents cast)."""
        tensors = [_float64(t) for t in self.tensors]
        want = self.forward(*tensors)
        grads: list[torch.Tensor] = []
        if self.grads and self.grad_of is not None:
            grads = self.grad_of(tensors, [c.double() for c in self.cotangents])
        return want, grads


def _float64(t: torch.Tensor) -> torch.Tensor:
    """t in float64, the same view (strides, storage offset) of its base cast to float64: an
    op that reads storage (as_strided) reads the same elements."""
    if not t.dtype.is_floating_point:
        return t
    base = t._base if t._base is not None else t
    copy = torch.empty_strided(base.shape, base.stride(), dtype=torch.float64)
    copy.copy_(base.detach())
    offset = t.storage_offset() - base.storage_offset()
    return copy.as_strided(t.shape, t.stride(), offset).requires_grad_(t.requires_grad)


def run_eagerly(call: Callable[..., Any], sample: Any, core_names: set[str]) -> EagerRun:
    """`call(input, *args, **kwargs)` on the sample eagerly, and its vector-Jacobian product for
    a fixed random cotangent, recording which core ops eager dispatched."""
    tensors, rebuild = _flatten(sample)

    def forward(*args: torch.Tensor) -> list[torch.Tensor]:
        inp, a, kw = rebuild(list(args))
        return _tensor_outputs(call(inp, *a, **kw))

    recorder = _Recorder()
    with recorder:
        want = forward(*tensors)
    run = EagerRun(forward, tensors, want, set())
    run.diff = [i for i, t in enumerate(tensors) if t.requires_grad]
    outs = [o for o in want if o.requires_grad and o.dtype.is_floating_point]
    if run.diff and outs:
        gen = torch.Generator().manual_seed(0)
        run.cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]

        def grad_of(primals: list[torch.Tensor], cots: list[torch.Tensor]) -> list[torch.Tensor]:
            inputs = [primals[i] for i in run.diff]
            results = [o for o in forward(*primals) if o.requires_grad]
            results = [o for o in results if o.dtype.is_floating_point]
            got = torch.autograd.grad(results, inputs, cots, allow_unused=True)
            return [
                g if g is not None else torch.zeros_like(t)
                for g, t in zip(got, inputs, strict=True)
            ]

        inputs = [tensors[i] for i in run.diff]
        with recorder:
            got = torch.autograd.grad(outs, inputs, run.cotangents, allow_unused=True)
        run.grads = [
            g if g is not None else torch.zeros_like(t) for g, t in zip(got, inputs, strict=True)
        ]
        run.grad_of = grad_of
    run.core = {s.split(".")[1] for s in recorder.seen if s.split(".")[1] in core_names}
    return run


_PARTIAL_VIEW = (
    "an input that is a view into a larger tensor's storage, which a step's inputs never are "
    "(as_strided of a view inside the step is compiled relative to the view: "
    "tests/compiler/test_as_strided.py)"
)


def _partial_view(t: torch.Tensor) -> bool:
    """t is a view whose storage holds more than its own elements (OpInfo's as_strided
    partial views read past them)."""
    if t._base is None:
        return False
    return t.storage_offset() != 0 or t.untyped_storage().nbytes() != t.numel() * t.element_size()


def check_on_wafer(run: EagerRun) -> SampleResult:
    """Trace and run the sample's forward and gradients on the wafer; compare with eager."""
    result = SampleResult(core=run.core)
    if any(_partial_view(t) for t in run.tensors):
        result.skipped = _PARTIAL_VIEW
        return result
    try:
        _compare(result, run)
    except UnsupportedOperator as exc:  # refused at compile, with the reason a user would get
        result.refused = "; ".join(sorted({str(i["suggestion"]) for i in exc.details["ops"]}))
        result.fwd = result.bwd = None
        result.why = None
    except Exception as exc:  # a trace or kernel failure is a verdict on this op, not a crash
        result.why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        result.fwd = False if result.fwd is None else result.fwd
    return result


def _cloned(forward: Callable[..., list[torch.Tensor]]) -> Callable[..., list[torch.Tensor]]:
    """forward on copies of its inputs: an op that updates an input in place (batch norm's
    running statistics) updates a copy, as a training step's buffers are."""
    return lambda *args: forward(*[a.clone() for a in args])


def _compare(result: SampleResult, run: EagerRun) -> None:
    forward, tensors = _cloned(run.forward), run.tensors
    ours, missing = run_on_wafer(forward, tensors)
    if missing:
        result.unsupported = missing
        result.why = "no wafer kernel for " + ", ".join(missing)
        return
    assert ours is not None
    random = result.core & RANDOM_OPS
    if not random:
        want = run.want
        if result.core & UNDEFINED_VALUES:  # compare shapes and dtypes only
            ours, want = [np.zeros_like(o) for o in ours], [torch.zeros_like(w) for w in want]
        mismatch = close(ours, want)
        if mismatch and not result.core & UNDEFINED_VALUES:
            mismatch = against_float64(result, ours, run, 0) and mismatch
        result.fwd = mismatch is None
        result.why = mismatch and "forward: " + mismatch
    if not run.grads:
        return
    diff = run.diff

    def backward(*args: torch.Tensor) -> list[torch.Tensor]:
        primals, cots = list(args[: len(tensors)]), list(args[len(tensors) :])

        def of_diff(*d: torch.Tensor) -> list[torch.Tensor]:
            full = list(primals)
            for i, t in zip(diff, d, strict=True):
                full[i] = t
            return [o for o in forward(*full) if o.dtype.is_floating_point][: len(cots)]

        _, vjp = torch.func.vjp(of_diff, *[primals[i] for i in diff])
        return list(vjp(cots))

    grads, missing = run_on_wafer(backward, [*tensors, *run.cotangents])
    if missing:
        result.unsupported = missing
        result.why = "backward: no wafer kernel for " + ", ".join(missing)
        return
    assert grads is not None
    if not random:
        mismatch = close(grads, run.grads)
        if mismatch:
            mismatch = against_float64(result, grads, run, 1) and mismatch
        result.bwd = mismatch is None
        result.why = result.why or (mismatch and "gradient: " + mismatch)


def against_float64(
    result: SampleResult, ours: list[np.ndarray], run: EagerRun, part: int
) -> str | None:
    """None when `ours` (the outputs, part 0, or the gradients, part 1) matches eager run in
    float64 although not eager fp32: eager's own rounding is then the difference."""
    try:
        reference = run.in_float64()[part]
    except Exception as exc:  # the op has no float64 kernel: eager fp32 stays the reference
        return f"{type(exc).__name__} in float64"
    mismatch = close(ours, reference)
    result.by_float64 = result.by_float64 or mismatch is None
    return mismatch


def measure(limit: int | None, only: set[str] | None = None) -> dict[str, OpCoverage]:
    """Coverage of every core op name (or those in `only`), over up to `limit` samples that
    exercise it (all with None)."""
    from torch.testing._internal.common_methods_invocations import op_db

    from tests.compiler.op_samples import extra_samples

    by_name = core_ops_by_name()
    names = set(by_name)
    report: dict[str, OpCoverage] = {}
    for name, overloads in sorted(by_name.items()):
        if only is not None and name not in only:
            continue
        cov = report[name] = OpCoverage(name, overloads)
        refused = [REFUSED[o] for o in overloads if o in REFUSED]
        if refused:
            cov.refused = refused[0]
            continue
        cov.supported = all(statically_supported(o) for o in overloads)
        counts_anyway = implicit(overloads)
        results: list[SampleResult] = []
        candidates = (
            (op.op, sample, counts_anyway and name in (op.name, op.aten_name))
            for op in opinfos_for(name, op_db)
            for sample, _ in samples(op, None)
        )
        extra = ((call, sample, counts_anyway) for call, sample in extra_samples(name))
        for call, sample, named in itertools.chain(candidates, extra):
            if limit is not None and len(results) >= limit:
                break
            try:
                run = run_eagerly(call, sample, names)
            except Exception:  # noqa: S112 - a sample eager itself rejects says nothing
                continue
            if name in run.core or named:
                results.append(check_on_wafer(run))
        _verdict(cov, results)
    return report


def _verdict(cov: OpCoverage, results: list[SampleResult]) -> None:
    cov.skipped_samples = sum(bool(r.skipped) for r in results)
    results = [r for r in results if not r.skipped]
    refused = [r for r in results if r.refused]
    cov.refused_samples = len(refused)
    cov.refused_why = refused[0].refused if refused else None
    results = [r for r in results if not r.refused]
    cov.samples = len(results) + len(refused)
    cov.by_float64 = sum(r.by_float64 for r in results)
    if not results and refused:  # every sample refused at compile, each with its reason
        return
    if not results:
        cov.why = "no OpInfo sample exercises it" + ("" if cov.supported else "; no wafer kernel")
        return
    failed = [r for r in results if r.unsupported or r.fwd is False or r.bwd is False]
    cov.supported = cov.supported and not any(r.unsupported for r in results)
    compared = [r for r in results if r.fwd is not None]
    cov.fwd_match = bool(compared) and all(r.fwd for r in compared)
    with_grads = [r for r in results if r.bwd is not None]
    cov.bwd_samples = len(with_grads)
    cov.bwd_match = cov.fwd_match and bool(with_grads) and all(r.bwd for r in with_grads)
    if failed:
        cov.why = failed[0].why
    elif not compared:
        cov.why = "random values: supported, compared in distribution only"


def summary(report: dict[str, OpCoverage]) -> dict[str, Any]:
    """The benchmark's figures: counts over core op names, and why each failing op fails;
    refused_samples: ops the compiler refuses for some arguments only (a boolean mask index),
    with how many samples and the reason (the op's other samples count as usual).

    bwd_match counts the ops whose gradients match eager; no_gradient the ops that match forward
    and have no gradient to check (integer or boolean outputs: comparisons, argmax, bitwise)."""
    values = list(report.values())
    failing = {
        c.name: c.why or "?"
        for c in values
        if c.refused is None and (not c.supported or c.why) and c.name not in RANDOM_OPS
    }
    return {
        "core_ops": len(values),
        "supported": sum(c.supported for c in values),
        "fwd_match": sum(c.fwd_match for c in values),
        "bwd_match": sum(c.bwd_match for c in values),
        "no_gradient": sum(c.fwd_match and not c.bwd_samples and not c.why for c in values),
        "refused_with_reason": sum(c.refused is not None for c in values),
        "failing": failing,
        "refused_samples": {
            c.name: f"{c.refused_samples} of {c.samples}: {c.refused_why}"
            for c in values
            if c.refused_samples
        },
        "skipped_samples": {c.name: c.skipped_samples for c in values if c.skipped_samples},
    }


def format_row(cov: OpCoverage) -> str:
    """One line of the per-op table."""
    name, state, count, note = table_row(cov)
    return f"{name:40s} {state:9s} {count:4d} samples  {note}"


def table_row(cov: OpCoverage) -> tuple[str, str, int, str]:
    """(op, state, samples, note) of the per-op table."""
    if cov.refused:
        state = "refused"
    elif cov.why and cov.name not in RANDOM_OPS:
        state = "FAILING"
    elif cov.bwd_match:
        state = "fwd+bwd"
    elif cov.fwd_match:
        state = "fwd"  # no gradient to check
    else:
        state = "supported"
    note = cov.refused or cov.why or ""
    if cov.by_float64 and not cov.why:
        note = f"{cov.by_float64} sample(s) match eager float64, not fp32 (eager's rounding)"
    if cov.refused_samples:
        note += f" {cov.refused_samples} sample(s) refused at compile: {cov.refused_why}"
    if cov.skipped_samples:
        note += f" {cov.skipped_samples} sample(s) not posable in a step: {_PARTIAL_VIEW}"
    return cov.name, state, cov.samples, note.strip()
