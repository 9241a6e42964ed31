"""Entry point of the sandboxed child: `python -m compiler.sandbox_child SCRATCH`.

Reads SCRATCH/task.json, imports the user's files from SCRATCH/src with the network blocked,
runs the task and writes SCRATCH/result.json ({"ok": true, ...} or {"ok": false, "error": ...}).
Tasks: "trace" (also writes graph.json and init.npz) and "batches" (streams .npy to stdout).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any


def _block_network() -> str:
    """Replace socket creation with a stub; report which isolation applied."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network access is disabled for model code on SAM")

    socket.socket = refuse  # type: ignore[assignment,misc]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    try:
        isolated = os.readlink("/proc/self/ns/net") != os.environ.get("SAM_PARENT_NETNS", "")
    except OSError:
        isolated = False
    return "netns+socket_stub" if isolated else "socket_stub"


ZOO_LIBRARIES = ("torchvision", "timm", "transformers")


def _preload_model_libraries(names: list[str], src: Path) -> None:
    """Import the model-zoo libraries the user's files name, before the socket stub goes in:
    their own imports (huggingface_hub -> ssl, which subclasses socket.socket) break after it."""
    import importlib

    text = "\n".join((src / name).read_text(errors="replace") for name in names)
    for library in ZOO_LIBRARIES:
        if library in text:
            try:
                importlib.import_module(library)
            except ImportError:
                pass  # not installed: the user's own import reports it with their line number


def _write(scratch: Path, result: dict[str, Any]) -> None:
    (scratch / "result.json").write_text(json.dumps(result))


def _trace(scratch: Path, payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    import numpy as np

    from compiler.frontend import trace_training_step
    from compiler.ir import save_graph

    traced = trace_training_step(payload["spec"], files, source_dir=scratch / "src")
    save_graph(traced.graph, scratch / "graph.json")
    np.savez(scratch / "init.npz", **traced.tensors)  # type: ignore[arg-type]
    return {"ok": True}


def _batches(scratch: Path, payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    from compiler.data import normalize_batch, write_array
    from compiler.user_code import load_batch_function

    spec = payload["spec"]
    make_batch = load_batch_function(spec, files, scratch / "src")
    out = sys.stdout.buffer
    step = int(payload["start_step"])
    batch_size = int(spec["data"]["batch_size"])
    while True:
        inputs, targets = normalize_batch(make_batch(step, batch_size))
        write_array(out, inputs)
        write_array(out, targets)
        out.flush()
        step += 1


def main(scratch: Path) -> None:
    """Run the task described in scratch/task.json."""
    task = json.loads((scratch / "task.json").read_text())
    if task["task"] == "trace":
        import torch  # noqa: F401 - loaded before the network is blocked, as the tracer needs it

        _preload_model_libraries(task["files"], scratch / "src")

    from compiler.errors import CompileError

    isolation = _block_network()
    src = scratch / "src"
    files = {name: (src / name).read_text() for name in task["files"]}
    try:
        runner = {"trace": _trace, "batches": _batches}[task["task"]]
        result = runner(scratch, task["payload"], files)
        result["network_isolation"] = isolation
    except CompileError as exc:
        result = {"ok": False, "error": exc.to_dict()}
    except (MemoryError, BrokenPipeError) as exc:
        result = {
            "ok": False,
            "error": {
                "kind": "model_error",
                "message": f"the model code ran out of memory ({type(exc).__name__})"
                if isinstance(exc, MemoryError)
                else "the batch consumer went away",
            },
        }
    except BaseException as exc:  # noqa: BLE001 - everything user code raises is a model error
        frames = [
            f"{Path(f.filename).name}:{f.lineno} in {f.name}"
            for f in traceback.extract_tb(exc.__traceback__)[-12:]
        ]
        message = f"the model code raised {type(exc).__name__}: {exc}"
        if "can't allocate memory" in str(exc) or "out of memory" in str(exc).lower():
            message = f"the model code ran out of memory: {exc}"
        result = {
            "ok": False,
            "error": {"kind": "model_error", "message": message, "details": {"traceback": frames}},
        }
    _write(scratch, result)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
