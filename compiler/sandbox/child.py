"""Inside the sandbox: `compiler.sandbox.child.run()` with /job as its first argument.

Reads /job/ctl/task.marshal (written by the worker, read-only here), imports the job's files from /job/src (read-only), runs the task and
writes /job/out/result.json ({"ok": true, ...} or {"ok": false, "error": ...}). Tasks:
"empty" (nothing: the start-up cost), "probe" (what isolation the sandbox sees), "trace"
(also writes graph.json and init.npz) and "batches" (streams frames on stdout).
Nothing here is trusted by the parent: it validates every file and frame it reads back.
"""

from __future__ import annotations

import marshal
import os
import sys

# Imports are kept to os, sys and marshal (built in) until a task needs more: they are the
# start-up cost of every sandbox (json alone, with re and enum, is 40% of an empty task's CPU;
# typing, pathlib and traceback would double it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OUT = "/job/out"
SRC = "/job/src"


def _write(result: dict[str, Any]) -> None:
    """result.json; a flat result of numbers and booleans is written without importing json."""
    if all(isinstance(v, (bool, int, float)) and v == v for v in result.values()):
        text = "{" + ", ".join(f'"{k}": {_number(v)}' for k, v in result.items()) + "}"
    else:
        import json

        text = json.dumps(result)
    with open(os.path.join(OUT, "result.json"), "w") as handle:
        handle.write(text)


def _number(value: bool | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _probe(payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle.read().splitlines())
    namespaces = {n: os.readlink(f"/proc/self/ns/{n}") for n in sorted(os.listdir("/proc/self/ns"))}
    return {
        "ok": True,
        "uid": os.getuid(),
        "pid": os.getpid(),
        "no_new_privs": status.get("NoNewPrivs", "").strip() == "1",
        "seccomp": status.get("Seccomp", "").strip() == "2",
        "cap_eff": status.get("CapEff", "").strip(),
        "namespaces": namespaces,
    }


def _trace(payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    from pathlib import Path

    import numpy as np

    from compiler.ir import save_graph

    if payload["spec"].get("entry"):  # a runner job: its script's train_step, captured
        from compiler.script_entry import capture_script

        traced = capture_script(payload["spec"], Path(SRC))
    else:
        from compiler.frontend import trace_training_step

        packages = payload.get("factory_packages")
        traced = trace_training_step(
            payload["spec"],
            files,
            source_dir=Path(SRC),
            **({"factory_packages": tuple(packages)} if packages is not None else {}),
        )
    save_graph(traced.graph, Path(OUT, "graph.json"))
    np.savez(Path(OUT, "init.npz"), **traced.tensors)  # type: ignore[arg-type]
    return {"ok": True}


def _batches(payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    from pathlib import Path

    from compiler.data import normalize_batch
    from compiler.sandbox.frames import write_array
    from compiler.user_code import load_batch_function

    spec = payload["spec"]
    out = sys.stdout.buffer
    if spec.get("entry"):
        return _script_batches(spec, int(payload["start_step"]), out)
    make_batch = load_batch_function(spec, files, Path(SRC))
    step = int(payload["start_step"])
    batch_size = int(spec["data"]["batch_size"])
    while True:
        inputs, targets = normalize_batch(make_batch(step, batch_size))
        write_array(out, inputs)
        write_array(out, targets)
        out.flush()
        step += 1


def _script_batches(spec: dict[str, Any], start_step: int, out: Any) -> dict[str, Any]:
    """A runner job's batches: its script's train_data_fn(), epoch after epoch. Once the last
    step's batch is written it waits to be stopped (the worker ends the sandbox when the job
    ends; an exit would read as a source that stopped early)."""
    import time
    from pathlib import Path

    from compiler.sandbox.frames import write_array
    from compiler.script_entry import feed_script

    def write(inputs: Any, targets: Any) -> None:
        write_array(out, inputs)
        write_array(out, targets)
        out.flush()

    feed_script(spec, Path(SRC), start_step, write)
    while True:
        time.sleep(3600)


def _empty(payload: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """Nothing, and the CPU time it took to get here (the sandbox's own start-up cost)."""
    import time  # built in and already loaded at start-up, unlike the resource extension

    return {"ok": True, "cpu_s": time.process_time()}


_TASKS = {"empty": _empty, "probe": _probe}
_TASKS.update(trace=_trace, batches=_batches)


def _failure(exc: BaseException) -> dict[str, Any]:
    import traceback

    from compiler.errors import CompileError, file_system_hint

    if isinstance(exc, CompileError):
        return exc.to_dict()
    if isinstance(exc, MemoryError):
        message = "the model code ran out of memory (MemoryError)"
    elif isinstance(exc, BrokenPipeError):
        message = "the batch consumer went away"
    else:
        message = f"the model code raised {type(exc).__name__}: {exc}{file_system_hint(exc)}"
        if "can't allocate memory" in str(exc) or "out of memory" in str(exc).lower():
            message = f"the model code ran out of memory: {exc}"
    frames = [
        f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
        for f in traceback.extract_tb(exc.__traceback__)[-12:]
    ]
    return {"kind": "model_error", "message": message, "details": {"traceback": frames}}


def _array_environment(spec: dict[str, Any]) -> None:
    """A job array's task sees its index as Slurm's tasks do: SAM_ARRAY_TASK_ID,
    SAM_ARRAY_JOB_ID and SAM_ARRAY_TASK_COUNT in the environment (make_batch may read them)."""
    task = spec.get("array_task")
    if isinstance(task, dict):
        os.environ["SAM_ARRAY_TASK_ID"] = str(int(task["task_id"]))
        os.environ["SAM_ARRAY_JOB_ID"] = str(task["array_job_id"])
        os.environ["SAM_ARRAY_TASK_COUNT"] = str(int(task["task_count"]))


def main() -> None:
    """Run the task described in /job/ctl/task.marshal (the worker wrote it: trusted data)."""
    with open("/job/ctl/task.marshal", "rb") as handle:
        task = marshal.load(handle)
    files = {}
    for name in task["files"]:
        with open(os.path.join(SRC, name)) as handle:
            files[name] = handle.read()
    _array_environment(task["payload"].get("spec") or {})
    try:
        result = _TASKS[task["task"]](task["payload"], files)
    except BaseException as exc:  # noqa: BLE001 - everything user code raises is a model error
        result = {"ok": False, "error": _failure(exc)}
    _write(result)


def wait_for_task() -> bool:
    """A pre-started sandbox (`--warm`): import what a trace needs, then wait for "go"."""
    import torch  # noqa: F401

    import compiler.frontend  # noqa: F401

    return sys.stdin.readline().strip() == "go"


def say_started() -> None:
    """Tell the parent this trusted code runs inside a built sandbox (before any tenant code)."""
    if "--started-fd" in sys.argv:
        fd = int(sys.argv[sys.argv.index("--started-fd") + 1])
        os.write(fd, b"1")
    # No descriptor of the worker's reaches tenant code (bwrap closed the bind descriptors; this
    # is the belt to its braces): only stdin, stdout and stderr stay open.
    os.closerange(3, 1 << 16)


def run() -> None:
    """The sandbox's entry point (`jobdir.child_argv()`: `python -I -S -B -c ...`)."""
    say_started()
    if "--warm" not in sys.argv or wait_for_task():
        main()
    _exit_now()


def _exit_now() -> None:
    """End the sandbox as soon as result.json is written: os._exit skips the interpreter's
    finalization (a full garbage collection and module teardown, a third of an empty task's CPU)
    and does not wait for threads the tenant code left behind (the PID namespace dies with this
    process anyway)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


if __name__ == "__main__":
    run()
