"""One pre-started sandbox per process for the next trace, so a cold compile does not wait for
the torch import (2-6 s).

It is an ordinary single-use sandbox (its own uid lease and namespaces) whose trusted child
imports torch and SAM's tracer and then blocks on stdin before any tenant file exists. A trace
writes the job's files into its (read-only bound) src/ directory and its task into ctl/, then
says "go": the tenant code runs in that sandbox, which is killed afterwards like any other.
Nothing is shared between two tasks. SAM_SANDBOX_WARM=0 turns it off.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from compiler.sandbox import launcher, options
from compiler.sandbox.jobdir import child_argv, make_scratch, mounts
from compiler.sandbox.limits import SandboxLimits

log = logging.getLogger("sam.sandbox")
_lock = threading.Lock()
_slot: Slot | None = None
_enabled = False


@dataclass
class Slot:
    """A started sandbox waiting for its task."""

    scratch: Path
    running: launcher.Running
    stdin: IO[bytes]
    limits: SandboxLimits

    def go(self) -> launcher.Running:
        """Release the child: it reads ctl/task.marshal and runs it."""
        self.stdin.write(b"go\n")
        self.stdin.close()
        return self.running

    def discard(self) -> None:
        """Kill it and remove its scratch directory."""
        self.stdin.close()
        self.running.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def warm_sandbox() -> None:
    """Keep one sandbox with default limits pre-started for the next trace (in the background)."""
    global _enabled
    if not options.current().warm:
        return
    _enabled = True
    _refill_soon()


_wanted = threading.Event()
_thread: threading.Thread | None = None


def _refill_soon() -> None:
    """Ask the refill thread for a new sandbox. One long-lived thread starts them all: bwrap's
    --die-with-parent kills a sandbox when the *thread* that started it exits."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_refill_loop, name="sam-sandbox-warm", daemon=True)
            _thread.start()
    _wanted.set()


def _refill_loop() -> None:
    while True:
        _wanted.wait()
        _wanted.clear()
        _refill()


def _refill() -> None:
    global _slot
    with _lock:
        if _slot is not None and _slot.running.proc.poll() is None:
            return
        try:
            _slot = _start(SandboxLimits())
        except Exception as exc:  # noqa: BLE001 - traces then start cold, and say why there
            log.warning("could not pre-start a sandbox: %s", exc)
            _slot = None


def _start(limits: SandboxLimits) -> Slot:
    scratch = make_scratch(None)
    with open(scratch / "stderr.txt", "wb") as stderr:
        running = launcher.start(
            child_argv("--warm"), mounts(scratch), limits, None, stderr, stdin=subprocess.PIPE
        )
    assert running.proc.stdin is not None
    return Slot(scratch, running, running.proc.stdin, limits)


def take(limits: SandboxLimits) -> Slot | None:
    """The waiting sandbox when it was started with these limits and still lives, else None."""
    global _slot
    with _lock:
        slot = _slot
        if slot is None or slot.limits != limits:
            return None  # a task with other limits starts cold; the slot waits for the next
        _slot = None
    if _enabled:
        _refill_soon()
    if slot.running.proc.poll() is not None:  # it died while waiting (killed, out of memory)
        slot.discard()
        return None
    return slot
