"""A pre-forked "zygote" that has torch and the tracer imported, so a sandboxed trace starts in
milliseconds instead of paying the 2-6 s torch import per compile.

The zygote is a separate process started with a scrubbed environment (it never holds the worker's
secrets). For each request it forks a child that applies the same limits as a cold sandbox child
(setsid, RLIMIT_CPU/AS/FSIZE/CORE, a new network namespace, cwd = scratch, scrubbed environment)
and runs `compiler.sandbox_child.main`. When the child exits the zygote writes
SCRATCH/exit.json {"returncode": n} (negative = killed by that signal). It forks only while
single-threaded (torch set to one thread, no ops run), so the children inherit no thread pools.
Set SAM_SANDBOX_ZYGOTE=0 to always spawn cold children.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_instance: Zygote | None = None
_failed = False


class Zygote:
    """Client side: one long-lived server process, one request per sandboxed trace."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compiler.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if line.strip() != "ready":
            self.close()
            raise RuntimeError("sandbox zygote did not start")

    def spawn(self, scratch: Path, limits: dict[str, Any]) -> int:
        """Fork a sandboxed child for `scratch`; returns its pid (also its process group)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"scratch": str(scratch), "limits": limits}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return int(reply["pid"])

    def alive(self) -> bool:
        """Whether the server process still runs."""
        return self.proc.poll() is None

    def close(self) -> None:
        """Stop the server (its running children finish or are killed by their limits)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def get_zygote(env: dict[str, str], cwd: Path) -> Zygote | None:
    """The shared zygote, started on first use; None when disabled or it cannot start."""
    global _instance, _failed
    if os.environ.get("SAM_SANDBOX_ZYGOTE", "1") == "0" or _failed:
        return None
    with _lock:
        if _instance is not None and not _instance.alive():
            _instance = None
        if _instance is None:
            try:
                _instance = Zygote(env, cwd)
                atexit.register(_instance.close)
            except Exception:
                _failed = True
                return None
        return _instance


def spawn_locked(zygote: Zygote, scratch: Path, limits: dict[str, Any]) -> int:
    """`zygote.spawn` under the module lock (threads of one worker share the zygote)."""
    with _lock:
        return zygote.spawn(scratch, limits)


# ----------------------------------------------------------------------------- server side

_children: dict[int, str] = {}


def _reap(signum: int, frame: Any) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        scratch = _children.pop(pid, None)
        if scratch is None:
            continue
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        try:
            Path(scratch, "exit.json").write_text(json.dumps({"returncode": code}))
        except OSError:
            pass


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: limit, isolate, run the task, never return."""
    code = 1
    try:
        from compiler.sandbox import SandboxLimits, _child_env, _limit_child

        scratch = Path(request["scratch"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        limits = SandboxLimits(**request["limits"])
        floor = _address_space_bytes() + 512 * 1024**2
        _limit_child(
            SandboxLimits(
                limits.cpu_seconds,
                max(limits.memory_bytes, floor),
                limits.wall_seconds,
                limits.file_bytes,
            )
        )
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update(_child_env(scratch))
        err = os.open(scratch / "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        from compiler.sandbox_child import main

        main(scratch)
        code = 0
    except BaseException:  # noqa: BLE001 - the exit code and stderr carry it to the parent
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def serve() -> None:
    """Server loop: one JSON request per stdin line, one {"pid"} reply per stdout line."""
    import torch

    torch.set_num_threads(1)
    import compiler.frontend  # noqa: F401 - the import the children should not pay again
    import compiler.sandbox_child  # noqa: F401

    signal.signal(signal.SIGCHLD, _reap)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        _children[pid] = request["scratch"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    serve()
