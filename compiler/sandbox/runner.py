"""Running one task of tenant code to completion in a sandbox, and reading back what it wrote.

Only /job/out is writable inside, and everything read from it is bounded and checked: files are
opened without following links and must be regular files under a size cap, result.json is small
JSON, the graph is validated, init.npz is read with allow_pickle=False and each array must be one
the graph declares, with its shape and dtype.
"""

from __future__ import annotations

import atexit
import json
import marshal
import os
import queue
import shutil
import signal
import stat
import subprocess
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from compiler.errors import CompileError, ModelError, error_from_dict
from compiler.sandbox import launcher, warm
from compiler.sandbox.jobdir import (
    child_argv,
    dataset_binds,
    link_project,
    make_scratch,
    mounts,
)
from compiler.sandbox.limits import SandboxLimits, SandboxUnavailable
from compiler.user_code import write_sources

T = TypeVar("T")
MAX_RESULT_BYTES = 1 << 20
MAX_GRAPH_BYTES = 64 << 20


def fill(
    scratch: Path,
    task: str,
    payload: dict[str, Any],
    files: dict[str, str],
    project: Path | None = None,
) -> None:
    """Write the job's files to src/ (after linking its `project` there, when given) and the
    task to ctl/task.marshal (marshal, not JSON: the sandbox reads it without importing json;
    only the worker writes it, and the sandbox binds ctl/ read-only)."""
    if project is not None:
        link_project(project, scratch / "src")
    write_sources(files, scratch / "src")
    task_doc = {"task": task, "payload": payload, "files": sorted(files)}
    (scratch / "ctl" / "task.marshal").write_bytes(marshal.dumps(task_doc))


def prepare(
    task: str, payload: dict[str, Any], files: dict[str, str], workdir: Path | None
) -> Path:
    """A scratch directory holding the task, ready for a new sandbox."""
    scratch = make_scratch(workdir)
    fill(scratch, task, payload, files)
    return scratch


def run_task(
    task: str,
    payload: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits | None = None,
    collect: Callable[[Path, dict[str, Any]], T] | None = None,
    *,
    project: Path | None = None,
    datasets: dict[str, Path] | None = None,
) -> T | dict[str, Any]:
    """Run `task` in a fresh sandbox (the job's `project` folder read-only at /job/src) and wait
    for it; every process it started is dead when this returns. Returns collect(out_dir, result) (or the result dict); raises the CompileError the
    task reported, ModelError when it died or ran out of wall time, SandboxUnavailable."""
    limits = limits or SandboxLimits()
    # a pre-started sandbox has its binds already: data sets need a fresh one
    slot = warm.take(limits) if task == "trace" and not datasets else None
    scratch = slot.scratch if slot else prepare(task, payload, files, None)
    try:
        if slot:  # a sandbox started earlier, torch imported, that waits for its one task
            try:
                fill(scratch, task, payload, files, project)
            except BaseException:
                slot.discard()
                raise
            running = slot.go()
        else:
            with open(scratch / "stderr.txt", "wb") as stderr:
                binds = mounts(scratch, project) + dataset_binds(datasets or {})
                running = launcher.start(child_argv(), binds, limits, None, stderr)
        try:
            returncode, problem = launcher.wait_checked(running, scratch / "out", limits)
        except subprocess.TimeoutExpired:
            raise _wall_error(limits) from None
        finally:
            running.kill()
        built = running.was_built()
        running.close()
        if problem is not None:
            raise output_error(problem, limits)
        result = read_result(scratch, returncode, limits, built)
        return collect(scratch / "out", result) if collect else result
    finally:
        discard_scratch(scratch)


_trash: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
_janitor_lock = threading.Lock()
_janitor: threading.Thread | None = None


def discard_scratch(scratch: Path) -> None:
    """Remove a finished task's scratch directory: renamed aside at once (it is gone from its
    path when the task's call returns) and deleted by a background thread, since deleting even
    a few directories waits on the file system's journal (milliseconds on a busy disk) and no
    caller needs to wait for that. What is left at interpreter exit is deleted then."""
    global _janitor
    trash = scratch.with_name(scratch.name + ".done")
    try:
        os.rename(scratch, trash)
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)
        return
    with _janitor_lock:
        if _janitor is None:
            _janitor = threading.Thread(target=_sweep_trash, name="sam-sandbox-trash", daemon=True)
            _janitor.start()
            atexit.register(_empty_trash)
    _trash.put(trash)


def _sweep_trash() -> None:
    while (trash := _trash.get()) is not None:
        shutil.rmtree(trash, ignore_errors=True)


def _empty_trash() -> None:
    """At interpreter exit: let the thread finish the directory it is deleting and the rest."""
    _trash.put(None)
    if _janitor is not None:
        _janitor.join(30)
    while not _trash.empty():
        trash = _trash.get_nowait()
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)


def read_bounded(path: Path, limit: int) -> bytes:
    """A file the sandbox wrote: a regular file (no link), at most `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ModelError(f"the model code left an unreadable {path.name}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ModelError(
                f"the model code left a {path.name} that is not a file of <= {limit} bytes"
            )
        return handle.read(limit + 1)[:limit]


def read_result(
    scratch: Path, returncode: int, limits: SandboxLimits, built: bool = True
) -> dict[str, Any]:
    """result.json of a finished task, or the error that explains why there is none."""
    try:
        result = json.loads(read_bounded(scratch / "out" / "result.json", MAX_RESULT_BYTES))
    except FileNotFoundError:
        raise death_error(scratch, returncode, limits, built) from None
    except ValueError:
        raise ModelError("the model code left a malformed result.json") from None
    if not isinstance(result, dict):
        raise ModelError("the model code left a malformed result.json")
    if not result.get("ok"):
        error = result.get("error")
        raise _as_tenant_error(error_from_dict(error if isinstance(error, dict) else {}))
    return result


def _as_tenant_error(error: CompileError) -> CompileError:
    """Tenant code may only fail its own job as model_error, invalid_spec, unsupported_op or
    compile_oom: never claim the worker is broken."""
    if error.kind == "internal":
        return ModelError(error.message, error.details)
    return error


def death_error(
    scratch: Path, returncode: int, limits: SandboxLimits, built: bool = True
) -> CompileError:
    """Why a task died without writing a result (bwrap's own failure means no sandbox)."""
    tail = stderr_tail(scratch)
    if not built:
        lines = tail.strip().splitlines()
        return SandboxUnavailable(lines[0] if lines else f"bwrap exited with {returncode}")
    if returncode in (
        -signal.SIGXCPU,
        -signal.SIGKILL,
        128 + signal.SIGXCPU,
        128 + signal.SIGKILL,
    ) and ("MemoryError" not in tail):
        return ModelError(
            f"the model code used more than {limits.cpu_seconds} CPU seconds (or was killed); "
            "look for an endless loop",
            {"limit": "cpu_seconds", "returncode": returncode, "stderr": tail},
        )
    if "MemoryError" in tail or "alloc" in tail.lower():
        return ModelError(
            f"the model code exceeded its memory limit of {limits.memory_bytes / 2**30:.1f} GiB; "
            "allocate less in the model's constructor or make_batch",
            {"limit": "memory_bytes", "memory_bytes": limits.memory_bytes, "stderr": tail},
        )
    return ModelError(
        f"the model process exited with code {returncode} without a result: "
        f"{tail[-500:] or 'no output'}",
        {"returncode": returncode, "stderr": tail},
    )


def stderr_tail(scratch: Path) -> str:
    """The last 4000 characters the task wrote on stderr."""
    try:
        with open(scratch / "stderr.txt", "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 4000))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def output_error(problem: str, limits: SandboxLimits) -> ModelError:
    """The task went over the caps of its output directory (and was killed for it)."""
    return ModelError(
        problem,
        {
            "limit": "output",
            "output_files": limits.output_files,
            "output_bytes": limits.output_bytes,
        },
    )


def _wall_error(limits: SandboxLimits) -> ModelError:
    return ModelError(
        f"the model code did not finish within {limits.wall_seconds:g} s of wall time; "
        "look for an endless loop or a blocking call in the model file",
        {"limit": "wall_seconds", "wall_seconds": limits.wall_seconds},
    )


def check_npz(path: Path, limit: int) -> None:
    """init.npz must be a regular file whose members declare at most `limit` bytes in total."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ModelError("the trace finished without writing its initial tensors") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        raise ModelError("the trace left an init.npz that is not a regular file within limits")
    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile:
        raise ModelError("the trace left a malformed init.npz") from None
    if declared > limit:
        raise ModelError("the trace's init.npz declares more bytes than allowed")
