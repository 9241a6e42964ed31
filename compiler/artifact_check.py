"""The trusted side's check of an artifact before a wafer runs it.

An artifact leaves the compile sandbox, where tenant code ran: a model.py can patch the front
end there and write any graph or manifest it likes (issue 29: an `aten.repeat` to 2^24 rows
declared with its input's shape grew a wafer worker to 2.98 GB). The integrity hashes only say
that nothing changed the artifact after the sandbox wrote it, so the wafer worker (which runs
outside any sandbox) checks what it is about to run, without trusting a number in it:

- the files: init.npz's members are bounded before numpy reads them (a zip bomb is refused);
- the graph: every op is one the runtime has a kernel for; every input's shape and dtype are
  well formed and init.npz holds exactly those tensors;
- every op's output shape and dtype are re-derived from its inputs with PyTorch's fake tensors
  (`FakeTensorMode`: shapes only, no memory) and must equal the declared ones; a mismatch names
  the node, its op and its source line;
- the kernels: every node belongs to a listed kernel, each rectangle lies in the region the
  artifact was compiled for, pipelined rectangles are disjoint, and the arch is the wafer's;
- the memory plan: each kernel's per-PE SRAM is planned again from the checked graph
  (`compiler.passes.memory`) and the manifest may not claim less in any category;
- host memory: the bytes the runtime holds for one step (state, the initial tensors, the batch,
  every op's output and a kernel's working space, a convolution's or pooling's windows included)
  are planned from the checked shapes; above the per-job bound the job fails `host_oom` before
  it runs.

A failure raises `ArtifactInvalid` (kind `artifact_invalid`) or `HostOOM` (kind `host_oom`).
"""

from __future__ import annotations

import math
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.errors import ArtifactInvalid, HostOOM
from compiler.ir import DTYPES, decode_arg, node_inputs, tensor_bytes
from compiler.ops import SUPPORTED_OPS
from compiler.passes.cost import GRID_SAMPLE_TAPS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph

# Ops whose result is a view of an argument in the runtime's numpy kernels: no new host memory.
_ALIASES = frozenset(
    {
        "getitem",
        "aten.view.default",
        "aten._unsafe_view.default",
        "aten.permute.default",
        "aten.t.default",
        "aten.transpose.int",
        "aten.expand.default",
        "aten.unsqueeze.default",
        "aten.squeeze.dim",
        "aten.squeeze.dims",
        "aten.squeeze.default",
        "aten.slice.Tensor",
        "aten.select.int",
        "aten.split.Tensor",
        "aten.split_with_sizes.default",
        "aten.alias.default",
    }
)
_STATE_ROLES = ("param", "buffer", "opt_state", "constant", "grad_acc")
_NUMPY_DTYPES = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "float32",  # numpy has no bfloat16: the runtime keeps it as float32
    "float64": "float64",
    "int64": "int64",
    "int32": "int32",
    "bool": "bool",
}
# Largest dimension or element count the check accepts at all (beyond any host's memory).
_MAX_ELEMENTS = 1 << 40


@dataclass(frozen=True)
class CheckedArtifact:
    """What the check found: the nodes re-derived and the host bytes one step needs."""

    nodes: int
    host_bytes: int


# (artifact dir, manifest digest, region, bound) -> result: array tasks reuse one artifact.
_PASSED: OrderedDict[tuple[str, str, int, int, str, int], CheckedArtifact] = OrderedDict()


def check_files(path: Path | str, max_bytes: int) -> None:
    """Refuse an artifact whose init.npz would expand past `max_bytes` (checked on the zip
    directory before numpy reads a byte of it), or that is not a plain zip of .npy members."""
    npz = Path(path) / "init.npz"
    try:
        with zipfile.ZipFile(npz) as archive:
            members = archive.infolist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArtifactInvalid(f"the artifact's init.npz is not a valid archive ({exc})") from exc
    total = sum(m.file_size for m in members)
    if total > max_bytes:
        raise HostOOM(
            f"the artifact's initial tensors expand to {_size(total)}, more than the "
            f"{_size(max_bytes)} a wafer worker gives one job (SAM_WAFER_JOB_MEMORY_BYTES)",
            {"host_bytes": total, "limit_bytes": max_bytes},
        )


def check_artifact(
    artifact: Any, *, rows: int, cols: int, arch: str, max_host_bytes: int
) -> CheckedArtifact:
    """Check a loaded `compiler.artifact.Artifact` for a rows x cols region of an `arch` wafer;
    raises ArtifactInvalid or HostOOM, returns what it measured. A passing artifact is
    remembered (by directory and manifest digest) so an array's tasks check it once."""
    from compiler.integrity import artifact_digest

    key = (
        str(Path(artifact.path).resolve()),
        artifact_digest(Path(artifact.path)),
        rows,
        cols,
        arch,
        max_host_bytes,
    )
    known = _PASSED.get(key)
    if known is not None:
        _PASSED.move_to_end(key)
        return known
    manifest, graph = artifact.manifest, artifact.graph
    if not isinstance(graph.get("nodes"), list) or not isinstance(graph.get("inputs"), list):
        raise ArtifactInvalid("the artifact's graph has no node or input list")
    _check_arch(manifest, arch)
    inputs = _check_inputs(graph, artifact.tensors)
    values = derive_shapes(graph, inputs)
    _check_kernels(manifest, graph, rows, cols)
    _check_memory_plan(manifest, graph, arch)
    host = host_bytes(manifest, graph, values, artifact.tensors)
    if host > max_host_bytes:
        raise HostOOM(
            f"one training step of this model needs about {_size(host)} of host memory, more "
            f"than the {_size(max_host_bytes)} a wafer worker gives one job "
            "(SAM_WAFER_JOB_MEMORY_BYTES); use a smaller batch_size or model",
            {"host_bytes": host, "limit_bytes": max_host_bytes},
        )
    result = CheckedArtifact(nodes=len(graph["nodes"]), host_bytes=host)
    _PASSED[key] = result
    while len(_PASSED) > 64:
        _PASSED.popitem(last=False)
    return result


def _check_arch(manifest: dict[str, Any], arch: str) -> None:
    from compiler.arch import normalize_arch

    try:
        built_for = normalize_arch(manifest.get("arch") or "wse2")
    except ValueError as exc:
        raise ArtifactInvalid(f"the artifact names an unknown arch: {exc}") from exc
    if built_for != normalize_arch(arch):
        raise ArtifactInvalid(
            f"the artifact was compiled for {built_for} but this wafer is {arch}; resubmit the "
            "job with compile_options.target_device set to this wafer's arch"
        )


def _dims(shape: Any, what: str) -> list[int]:
    """A declared shape as a list of non-negative ints (refused otherwise)."""
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= _MAX_ELEMENTS for d in shape
    ):
        raise ArtifactInvalid(f"{what} has no valid static shape ({shape!r})")
    if math.prod(shape) > _MAX_ELEMENTS:
        raise ArtifactInvalid(f"{what} declares {math.prod(shape)} elements")
    return shape


def _check_inputs(graph: dict[str, Any], tensors: dict[str, Any]) -> dict[str, Any]:
    """{input name: (shape, dtype)} with each state input's init.npz tensor matching it."""
    import numpy as np

    found: dict[str, object] = {}
    for inp in graph["inputs"]:
        name = str(inp.get("name"))
        what = f"graph input {name} ({inp.get('source_name') or inp.get('role')})"
        shape = _dims(inp.get("shape"), what)
        dtype = inp.get("dtype")
        if dtype not in DTYPES:
            raise ArtifactInvalid(f"{what} has an unknown dtype {dtype!r}")
        if inp.get("role") in _STATE_ROLES:
            value = tensors.get(name)
            if value is None:
                raise ArtifactInvalid(f"{what} has no initial value in init.npz")
            if list(value.shape) != shape or np.dtype(value.dtype) != np.dtype(
                _NUMPY_DTYPES[dtype]
            ):
                raise ArtifactInvalid(
                    f"{what} is declared {dtype}{shape} but init.npz holds "
                    f"{value.dtype}{list(value.shape)}"
                )
        found[name] = (shape, dtype)
    extra = sorted(set(tensors) - set(found))
    if extra:
        raise ArtifactInvalid(f"init.npz holds tensors the graph does not name: {extra[:5]}")
    return found


def derive_shapes(graph: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the graph on fake tensors (shapes and dtypes only, no data) and compare every node's
    result with its declared shape(s) and dtype(s); returns {value name: fake result}."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    env: dict[str, object] = {}
    with FakeTensorMode(allow_non_fake_inputs=False):
        for name, (shape, dtype) in inputs.items():
            env[name] = torch.empty(shape, dtype=getattr(torch, dtype))
        for node in graph["nodes"]:
            env[str(node.get("name"))] = _derive(node, env)
    return env


def _derive(node: dict[str, Any], env: dict[str, Any]) -> Any:
    import torch

    name, target = str(node.get("name")), str(node.get("target"))
    where = f"node {name} ({target}{_at(node)})"
    if target not in SUPPORTED_OPS:
        raise ArtifactInvalid(f"{where} is not an op the wafer runtime has a kernel for")
    try:
        args = decode_arg(node.get("args") or [], env, to_torch=True)
        kwargs = decode_arg(node.get("kwargs") or {}, env, to_torch=True)
        if target == "getitem":
            result = args[0][args[1]]
        else:
            space, op, overload = target.split(".")
            packet = getattr(getattr(torch.ops, space), op)
            result = getattr(packet, overload)(*args, **kwargs)
    except ArtifactInvalid:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the forged args make torch raise
        raise ArtifactInvalid(
            f"{where}: its output shape cannot be derived from its inputs "
            f"({type(exc).__name__}: {str(exc)[:300]})"
        ) from None
    _compare(node, result, where)
    return result


def _compare(node: dict[str, Any], result: Any, where: str) -> None:
    import torch

    if isinstance(result, torch.Tensor):
        derived = [(list(result.shape), _dtype_name(result.dtype))]
        declared = [(node.get("shape"), node.get("dtype"))]
    elif isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        derived = [(list(r.shape), _dtype_name(r.dtype)) for r in result]
        shapes, dtypes = node.get("shapes") or [], node.get("dtypes") or []
        declared = list(zip(shapes, dtypes, strict=False))
        if len(shapes) != len(result) or len(dtypes) != len(result):
            declared = [(shapes, dtypes)]
    else:
        return  # no tensor result (a None gradient slot): nothing the runtime allocates
    if declared != derived:
        got = ", ".join(f"{d}{s}" for s, d in derived)
        said = ", ".join(f"{d}{s}" for s, d in declared)
        raise ArtifactInvalid(
            f"{where} declares its output as {said} but its inputs give {got}: the artifact "
            "does not describe what it would compute, so it was not run (a model that patches "
            "the compiler is refused; otherwise report it with the job spec)",
            {"node": node.get("name"), "op": node.get("target"), "declared": said, "derived": got},
        )


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _at(node: dict[str, Any]) -> str:
    source = node.get("source")
    return f" at {source}" if isinstance(source, str) and source else ""


def _check_kernels(manifest: dict[str, Any], graph: dict[str, Any], rows: int, cols: int) -> None:
    """Kernels name every node once, lie in the compiled region (which fits this one) and,
    pipelined, do not overlap."""
    region = manifest.get("region") or {}
    want_rows, want_cols = int(region.get("rows") or rows), int(region.get("cols") or cols)
    if want_rows > rows or want_cols > cols or want_rows < 1 or want_cols < 1:
        raise ArtifactInvalid(
            f"the artifact was compiled for a {want_rows}x{want_cols} region, which does not "
            f"fit the job's {rows}x{cols} region"
        )
    kernels = manifest.get("kernels")
    if not isinstance(kernels, list):
        raise ArtifactInvalid("the artifact's manifest lists no kernels")
    streaming = manifest.get("execution_mode") == "weight_streaming"
    owner: dict[str, str] = {}
    rects: list[tuple[str, tuple[int, int, int, int]]] = []
    for kernel in kernels:
        kid = str(kernel.get("id"))
        rect = kernel.get("rect")
        if not (
            isinstance(rect, list)
            and len(rect) == 4
            and all(isinstance(v, int) and not isinstance(v, bool) for v in rect)
        ):
            raise ArtifactInvalid(f"kernel {kid} has no valid rectangle ({rect!r})")
        r, c, h, w = rect
        if r < 0 or c < 0 or h < 1 or w < 1 or r + h > want_rows or c + w > want_cols:
            raise ArtifactInvalid(
                f"kernel {kid}'s rectangle {rect} lies outside the {want_rows}x{want_cols} region"
            )
        for name in kernel.get("nodes") or []:
            if str(name) in owner:
                raise ArtifactInvalid(f"node {name} is listed in kernels {owner[name]} and {kid}")
            owner[str(name)] = kid
        rects.append((kid, (r, c, h, w)))
    if not streaming:
        _disjoint(rects)
    for node in graph["nodes"]:
        kid = node.get("kernel")
        if kid is not None and owner.get(str(node.get("name"))) != kid:
            raise ArtifactInvalid(
                f"node {node.get('name')} says it runs in kernel {kid}, which does not list it"
            )


def _disjoint(rects: list[tuple[str, tuple[int, int, int, int]]]) -> None:
    ordered = sorted(rects, key=lambda item: item[1][0])
    for i, (kid, (r, c, h, w)) in enumerate(ordered):
        for other, (r2, c2, _h2, w2) in ordered[i + 1 :]:
            if r2 >= r + h:
                break
            if c < c2 + w2 and c2 < c + w:
                raise ArtifactInvalid(f"kernels {kid} and {other} overlap on the region")


def _check_memory_plan(manifest: dict[str, Any], graph: IrGraph, arch: str) -> None:
    """Plan each kernel's SRAM again from the checked graph; the manifest may claim more than
    the plan in a category (a roomier plan only costs its own job) but never less."""
    from compiler.arch import get_arch_info
    from compiler.passes.fusion import Kernel
    from compiler.passes.memory import CATEGORIES, plan_memory

    info = get_arch_info(arch)
    listed = manifest["kernels"]
    kernels = [
        Kernel(str(k["id"]), str(k.get("op")), [str(n) for n in k.get("nodes") or []])
        for k in listed
    ]
    streaming = manifest.get("execution_mode") == "weight_streaming"
    plans = plan_memory(
        graph,
        kernels,
        {
            "fp16": bool(manifest.get("fp16")),
            "optimizer_offload": bool(manifest.get("optimizer_state_offload")),
            "streaming": streaming,
            # not read by plan_memory
            "max_activation_memory": None,
            "activation_budget_bytes": None,
            "micro_batches": 1,
            "recompute": False,
        },
    )
    stashed = sum(p.activations for p in plans)
    for kernel, plan in zip(listed, plans, strict=True):
        _, _, h, w = kernel["rect"]
        area = h * w
        if streaming:
            need = {
                "weights": math.ceil(plan.weights / area),
                "gradients": math.ceil(plan.gradients / area),
                "optimizer": 0,
                "activations": math.ceil(stashed / area),
            }
        else:
            need = {c: v for c, v in plan.per_pe(area, 0).items() if c in CATEGORIES}
        claimed = kernel.get("memory_per_pe") or {}
        for category, bytes_per_pe in need.items():
            said = claimed.get(category)
            if not isinstance(said, int) or said < bytes_per_pe:
                raise ArtifactInvalid(
                    f"kernel {kernel['id']} claims {said!r} bytes per PE of {category} but its "
                    f"nodes need {bytes_per_pe}: the artifact's memory plan is not the compiler's",
                    {"kernel": kernel["id"], "category": category},
                )
        total = sum(int(claimed.get(c) or 0) for c in CATEGORIES) + info.sram_reserved_bytes
        if total > info.sram_bytes:
            raise ArtifactInvalid(
                f"kernel {kernel['id']} needs {total} bytes per PE, more than a PE's "
                f"{info.sram_bytes} bytes of SRAM"
            )


def host_bytes(
    manifest: dict[str, Any], graph: dict[str, Any], values: dict[str, Any], tensors: dict[str, Any]
) -> int:
    """Host bytes a job holds at its peak, as the wafer worker runs it: at load, the initial
    tensors and the state copied from them; during a step, the state, the whole batch and the
    values still to be read (the runtime drops each after its last reader; a view keeps the
    value it views), plus a kernel's working space: twice the largest value, or what a kernel
    known to need more holds besides its arguments and result (`work_bytes`)."""
    import numpy as np

    initial = sum(int(np.asarray(t).nbytes) for t in tensors.values())
    micro = max(1, int(manifest.get("micro_batches") or 1))
    batch = sum(
        micro * tensor_bytes(i["shape"], i["dtype"])
        for i in graph["inputs"]
        if i.get("role") in ("input", "target")
    )
    nodes = graph["nodes"]
    owner: dict[str, str] = {}
    for node in nodes:
        name = str(node.get("name"))
        refs = node_inputs(node) if node.get("target") in _ALIASES else []
        owner[name] = owner.get(refs[0], refs[0]) if refs else name
    last: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for ref in node_inputs(node):
            last[owner.get(ref, ref)] = index
    for ref in [o.get("ref") for o in graph.get("outputs") or []] + _accuracy_refs(graph):
        last[owner.get(str(ref), str(ref))] = len(nodes)
    live = peak = largest = work = 0
    freed_after: dict[int, int] = {}
    for index, node in enumerate(nodes):
        name = str(node.get("name"))
        work = max(work, work_bytes(node, values))
        if owner[name] == name:
            size = _value_bytes(values.get(name))
            largest = max(largest, size)
            live += size
            end = last.get(name, index)
            freed_after[end] = freed_after.get(end, 0) + size
        peak = max(peak, live)
        live -= freed_after.pop(index, 0)
    return max(2 * initial, initial + batch + peak + max(2 * largest, work))


# Windowed kernels gather every output's receptive field (`wse_sim.runtime.kernels.conv.windows`)
# and copy those windows for their contraction or reduction: working space of kernel-area times
# their output, whatever their output's size (issue 29: a 15x15 filter on 32 channels planned
# 1.3 MiB and held 452 MiB). Copies of the windows each kernel holds at once (measured).
_WINDOW_COPIES = {
    "aten.convolution.default": 2,
    "aten.convolution_backward.default": 3,
    "aten.max_pool2d_with_indices.default": 2,
}


def work_bytes(node: dict[str, Any], values: dict[str, Any]) -> int:
    """Bytes a kernel's temporaries hold while `node` runs, for the kernels whose temporaries
    outgrow twice the largest value (windowed kernels, grid sampling's backward); 0 otherwise."""
    target = str(node.get("target"))
    copies = _WINDOW_COPIES.get(target)
    if copies is None and target != _GRID_SAMPLE_BACKWARD:
        return 0
    try:
        args = decode_arg(node.get("args") or [], values)
        if copies is None:
            return _grid_sample_bytes(args)
        elements = _window_elements(target, args, values.get(str(node["name"])))
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        return 0  # its shapes were derived above: an op torch accepted but not shaped as here
    return copies * elements * 4  # the runtime computes in at least 4 bytes a value


# Grid sampling's backward (`wse_sim.runtime.kernels.grid_sample`) keeps every tap of every
# output pixel at once, in float64: 5 arrays a tap (x, y, weight, its two slopes), 16 taps for
# bicubic, 4 bilinear, 1 nearest; a bicubic one held 12x its largest argument (op coverage).
_GRID_SAMPLE_BACKWARD = "aten.grid_sampler_2d_backward.default"


def _grid_sample_bytes(args: list[Any]) -> int:
    """float64 bytes: per output pixel its taps and their coordinate temporaries, per pixel and
    channel four gathered or scaled vectors, and the image and its gradient, each twice."""
    x, grid, mode = args[1], args[2], int(args[3])
    pixels = int(grid.numel()) // 2
    channels = int(x.shape[1])
    per_pixel = 5 * GRID_SAMPLE_TAPS.get(mode, 16) + 8 + 4 * channels
    return 8 * (pixels * per_pixel + 4 * int(x.numel()))


def _window_elements(target: str, args: list[Any], result: Any) -> int:
    """Elements of the window array: batch x channels x positions x kernel area."""
    if target == "aten.max_pool2d_with_indices.default":
        kernel = args[1] if isinstance(args[1], list) else [args[1]]
        return int(result[0].numel()) * int(kernel[0]) * int(kernel[-1])
    backward = target == "aten.convolution_backward.default"
    grad, x, w = (args[0], args[1], args[2]) if backward else (result, args[0], args[1])
    transposed, groups = bool(args[7 if backward else 6]), int(args[9 if backward else 8])
    area = math.prod(int(d) for d in w.shape[2:])
    if transposed:  # filter taps scattered over the input's positions, per output channel
        positions, channels = math.prod(int(d) for d in x.shape[2:]), int(w.shape[1]) * groups
    else:
        positions, channels = math.prod(int(d) for d in grad.shape[2:]), int(x.shape[1])
    return int(x.shape[0]) * channels * positions * area


def _accuracy_refs(graph: dict[str, Any]) -> list[str]:
    """The values the runtime's accuracy reads after a step (log-probabilities and targets)."""
    for node in graph["nodes"]:
        if str(node.get("target")).startswith("aten.nll_loss_forward"):
            return node_inputs(node)[:2]
    return []


def _value_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        # numpy has no bfloat16 and no half matmul: the runtime holds at least 4 bytes a float
        size = max(value.element_size(), 4) if value.is_floating_point() else value.element_size()
        return int(value.numel()) * size
    if isinstance(value, (tuple, list)):
        return sum(_value_bytes(v) for v in value)
    return 0


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
