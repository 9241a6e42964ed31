"""Tracing a job's training step in a sandbox, and checking what the trace hands back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import ModelError
from compiler.ir import INPUT_ROLES
from compiler.sandbox.limits import SandboxLimits
from compiler.sandbox.runner import MAX_GRAPH_BYTES, check_npz, read_bounded, run_task

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import TraceInfo
    from sam_domain.ir import IrGraph

_NUMPY_OF_IR = {"float32": "float32", "float16": "float16", "int64": "int64", "int32": "int32"}
_NUMPY_OF_IR.update(bool="bool", bfloat16="float32")  # numpy has no bfloat16 (frontend._to_numpy)
# every input the trace gives an initial value for: all but the batch (grad_acc/micro come with
# micro-batching, see compiler.ir)
_TENSOR_ROLES = tuple(r for r in INPUT_ROLES if r not in ("input", "target"))


def run_trace(
    spec: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits | None = None,
    *,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> tuple[IrGraph, dict[str, np.ndarray], TraceInfo]:
    """(graph, initial tensors, info) of the spec's model (built-in or uploaded), traced in a
    sandbox (with the job's `project` folder at /job/src, and the `datasets` a runner job's
    script reads at /datasets/NAME); raises ModelError (or what the trace
    reported) and SandboxUnavailable."""
    limits = limits or SandboxLimits()

    def collect(out: Path, result: dict[str, Any]) -> tuple[IrGraph, dict[str, np.ndarray]]:
        graph = _load_graph(out / "graph.json")
        return graph, _load_tensors(out / "init.npz", graph, limits.file_bytes)

    payload = {"spec": spec, "factory_packages": list(limits.factory_packages)}
    traced = run_task("trace", payload, files, limits, collect, project=project, datasets=datasets)
    assert isinstance(traced, tuple)
    graph, tensors = traced
    info: TraceInfo = {"sandboxed": True, "network_isolation": "netns+seccomp"}
    return graph, tensors, info


def _load_graph(path: Path) -> IrGraph:
    from compiler.ir import validate_graph

    try:
        graph: IrGraph = json.loads(read_bounded(path, MAX_GRAPH_BYTES))
        validate_graph(graph)
    except FileNotFoundError:
        raise ModelError("the trace finished without writing its graph") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"the trace handed back a malformed graph: {exc}") from None
    return graph


def _load_tensors(path: Path, graph: IrGraph, limit: int) -> dict[str, np.ndarray]:
    """The initial tensors: only names the graph declares, each with its shape and dtype."""
    declared = {i["name"]: i for i in graph["inputs"] if i["role"] in _TENSOR_ROLES}
    tensors: dict[str, np.ndarray] = {}
    check_npz(path, limit)  # the task is dead: nothing can swap the file after this check
    with np.load(path, allow_pickle=False) as npz:
        for name in npz.files:
            spec = declared.get(name)
            if spec is None:
                raise ModelError(f"the trace handed back an undeclared tensor {name[:80]!r}")
            array = npz[name]
            want = (tuple(spec["shape"]), _NUMPY_OF_IR.get(spec["dtype"], spec["dtype"]))
            if (array.shape, array.dtype.name) != want:
                raise ModelError(f"the trace's tensor {name!r} does not match the graph")
            tensors[name] = array
    missing = [n for n, i in declared.items() if i["role"] == "param" and n not in tensors]
    if missing:
        raise ModelError(f"the trace handed back no initial value for {missing[:5]}")
    return tensors
