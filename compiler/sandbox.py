"""Running untrusted user code (model files, make_batch) in a limited subprocess.

The child (`python -m compiler.sandbox_child SCRATCH`) runs with:
- RLIMIT_CPU (CPU seconds), RLIMIT_DATA (heap and anonymous memory, what the model really
  allocates; not RLIMIT_AS, since the CUDA build of torch that torchvision needs maps 3.6 GB of
  library address space before any model code runs), RLIMIT_FSIZE and no core dumps, set in the
  forked child;
- a wall-clock timeout enforced by the parent, which kills the child's whole process group;
- no network: a fresh network namespace (unshare(CLONE_NEWNET) via libc, which works when the
  worker runs as root or has CAP_SYS_ADMIN) and, always, `socket.socket` replaced by a stub that
  raises before user code is imported; `network_isolation` in results says which applied;
- cwd = a fresh scratch directory holding the uploaded files; a scrubbed environment.
Results come back through files in the scratch directory (JSON + .npz, never pickle), or for
batches as framed raw arrays (dtype + shape header) over the child's stdout pipe.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import CompileError, ModelError, error_from_dict
from compiler.user_code import write_sources

_CLONE_NEWNET = 0x40000000
_PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed child process."""

    cpu_seconds: int = 120
    memory_bytes: int = 4 * 1024**3
    wall_seconds: float = 180.0
    file_bytes: int = 2 * 1024**3


DATA_LIMITS = SandboxLimits(cpu_seconds=24 * 3600, wall_seconds=600.0)


def _limit_child(limits: SandboxLimits) -> None:
    """preexec_fn: runs in the forked child before exec (keep it async-signal simple)."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNET)
    except Exception:
        pass  # not permitted here: the child's socket stub still blocks the network


def _child_env(scratch: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(_PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
        "SAM_PARENT_NETNS": _netns_id(),
    }


def _netns_id() -> str:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


def _prepare_scratch(
    task: str, payload: dict[str, Any], files: dict[str, str], workdir: Path | None
) -> Path:
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="sam-sandbox-", dir=workdir))
    write_sources(files, scratch / "src")
    (scratch / "task.json").write_text(
        json.dumps({"task": task, "payload": payload, "files": sorted(files)})
    )
    return scratch


def _start_child(
    task: str,
    payload: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits,
    workdir: Path | None,
    stdout: Any,
) -> tuple[subprocess.Popen, Path]:
    scratch = _prepare_scratch(task, payload, files, workdir)
    stderr = open(scratch / "stderr.txt", "wb")  # noqa: SIM115 - closed by the parent below
    proc = subprocess.Popen(
        [sys.executable, "-m", "compiler.sandbox_child", str(scratch)],
        cwd=scratch,
        env=_child_env(scratch),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        preexec_fn=lambda: _limit_child(limits),
        close_fds=True,
    )
    stderr.close()
    return proc, scratch


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_sandboxed(
    task: str,
    payload: dict[str, Any],
    files: dict[str, str],
    limits: SandboxLimits | None = None,
    workdir: Path | None = None,
) -> tuple[dict[str, Any], Path]:
    """Run `task` in a child; returns (result.json dict, scratch dir). Raises ModelError (or the
    CompileError the child reported) on failure. The caller removes the scratch dir.

    "trace" tasks fork from the warm zygote (`compiler.zygote`) when it is available.
    """
    limits = limits or SandboxLimits()
    zygote = _zygote_for(task)
    returncode: int | None = None
    if zygote is not None:
        scratch = _prepare_scratch(task, payload, files, workdir)
        try:
            returncode = _wait_forked(zygote, scratch, limits)
        except (OSError, ValueError, KeyError):  # the zygote died: run this one cold
            shutil.rmtree(scratch, ignore_errors=True)
            zygote.close()
    if returncode is None:
        proc, scratch = _start_child(task, payload, files, limits, workdir, subprocess.DEVNULL)
        returncode = _wait_cold(proc, scratch, limits)
    result = _read_result(scratch, returncode, limits)
    return result, scratch


def warm_sandbox() -> None:
    """Start the trace zygote in a background thread (compile workers call this at start-up so
    the first user compile does not pay the torch import)."""
    import threading

    threading.Thread(target=_zygote_for, args=("trace",), daemon=True).start()


def _zygote_for(task: str) -> Any:
    if task != "trace":
        return None
    from compiler.zygote import get_zygote

    home = Path(tempfile.gettempdir())
    return get_zygote(_child_env(home), home)


def _wait_cold(proc: subprocess.Popen, scratch: Path, limits: SandboxLimits) -> int:
    try:
        return proc.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        _kill(proc)
        shutil.rmtree(scratch, ignore_errors=True)
        raise _wall_error(limits) from None


def _wait_forked(zygote: Any, scratch: Path, limits: SandboxLimits) -> int:
    from compiler.zygote import spawn_locked

    pid = spawn_locked(zygote, scratch, asdict(limits))
    deadline = time.monotonic() + limits.wall_seconds
    exit_file = scratch / "exit.json"
    delay = 0.005
    while not exit_file.exists():
        if time.monotonic() > deadline:
            _killpg(pid)
            shutil.rmtree(scratch, ignore_errors=True)
            raise _wall_error(limits)
        time.sleep(delay)
        delay = min(0.05, delay * 1.5)
    return int(json.loads(exit_file.read_text())["returncode"])


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wall_error(limits: SandboxLimits) -> ModelError:
    return ModelError(
        f"the model code did not finish within {limits.wall_seconds:g} s of wall time; "
        "look for an endless loop or a blocking call in the model file",
        {"limit": "wall_seconds", "wall_seconds": limits.wall_seconds},
    )


def _read_result(scratch: Path, returncode: int, limits: SandboxLimits) -> dict[str, Any]:
    path = scratch / "result.json"
    if path.exists():
        result = json.loads(path.read_text())
        if not result.get("ok"):
            shutil.rmtree(scratch, ignore_errors=True)
            raise error_from_dict(result.get("error") or {})
        return result
    error = _death_error(scratch, returncode, limits)
    shutil.rmtree(scratch, ignore_errors=True)
    raise error


def _death_error(scratch: Path, returncode: int, limits: SandboxLimits) -> CompileError:
    """Why a child died without writing a result."""
    tail = _stderr_tail(scratch)
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "MemoryError" not in tail:
        return ModelError(
            f"the model code used more than {limits.cpu_seconds} CPU seconds (or was killed); "
            "look for an endless loop",
            {"limit": "cpu_seconds", "returncode": returncode, "stderr": tail},
        )
    if "MemoryError" in tail or "alloc" in tail.lower():
        return _memory_error(limits, tail)
    return ModelError(
        f"the model process exited with code {returncode} without a result: "
        f"{tail[-500:] or 'no output'}",
        {"returncode": returncode, "stderr": tail},
    )


def _memory_error(limits: SandboxLimits, tail: str) -> ModelError:
    return ModelError(
        f"the model code exceeded its memory limit of {limits.memory_bytes / 2**30:.1f} GiB; "
        "allocate less in the model's constructor or make_batch",
        {"limit": "memory_bytes", "memory_bytes": limits.memory_bytes, "stderr": tail},
    )


def _stderr_tail(scratch: Path) -> str:
    try:
        return (scratch / "stderr.txt").read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def stream_user_batches(
    spec: dict[str, Any],
    files: dict[str, str],
    start_step: int,
    workdir: Path | None,
    limits: SandboxLimits | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """make_batch(step, batch_size) for step = start_step, ... run in a sandboxed child that
    streams framed arrays (`compiler.data.write_array`) over a pipe; the pipe's buffer bounds how
    far it runs ahead of the consumer."""
    from compiler.data import read_array

    limits = limits or DATA_LIMITS
    payload = {"spec": spec, "start_step": int(start_step)}
    proc, scratch = _start_child("batches", payload, files, limits, workdir, subprocess.PIPE)
    stream = proc.stdout
    assert stream is not None
    try:
        while True:
            ready, _, _ = select.select([stream], [], [], limits.wall_seconds)
            if not ready:
                raise ModelError(f"make_batch produced no batch within {limits.wall_seconds:g} s")
            try:
                inputs, targets = read_array(stream), read_array(stream)
            except (EOFError, ValueError, OSError):
                proc.wait(timeout=10)
                _read_result(scratch, proc.returncode, limits)
                raise ModelError("make_batch stopped producing batches") from None
            yield inputs, targets
    finally:
        stream.close()
        if proc.poll() is None:
            _kill(proc)
        shutil.rmtree(scratch, ignore_errors=True)


def limits_dict(limits: SandboxLimits) -> dict[str, Any]:
    """JSON form of the limits (for summaries)."""
    return asdict(limits)
