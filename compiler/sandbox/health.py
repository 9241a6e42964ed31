"""What this worker's sandbox provides, checked by running one empty sandbox (at worker start)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from compiler.errors import CompileError
from compiler.sandbox import launcher
from compiler.sandbox.limits import SandboxLimits
from compiler.sandbox.runner import run_task
from compiler.sandbox.uids import sweep_unleased

_PROBE_LIMITS = SandboxLimits(cpu_seconds=20, memory_bytes=1024**3, wall_seconds=30.0)


def bwrap_version() -> str:
    """`bwrap --version`, or why it cannot be run."""
    try:
        done = subprocess.run(
            [launcher.bwrap_path(), "--version"], capture_output=True, text=True, timeout=10
        )
    except OSError as exc:
        return f"unavailable: {exc.strerror}"
    return done.stdout.strip() or done.stderr.strip()


def probe() -> dict[str, Any]:
    """{"ok": True, ...what the sandbox isolates...} or {"ok": False, "missing": reason}."""
    start = time.perf_counter()
    try:
        swept = sweep_unleased()
        seen = run_task("probe", {}, {}, _PROBE_LIMITS)
    except CompileError as exc:
        reason = exc.details.get("missing", exc.message)
        return {"ok": False, "missing": exc.message, "reason": reason, "bwrap": bwrap_version()}
    assert isinstance(seen, dict)
    own = {n: os.readlink(f"/proc/self/ns/{n}") for n in seen["namespaces"]}
    fresh = sorted(n for n, v in seen["namespaces"].items() if own.get(n) != v)
    checks = {
        "no_new_privs": seen["no_new_privs"],
        "seccomp": seen["seccomp"],
        "no_capabilities": int(seen["cap_eff"], 16) == 0,
        "pid_namespace": seen["pid"] <= 3,
        "namespaces": all(n in fresh for n in ("ipc", "mnt", "net", "pid", "user", "uts")),
    }
    missing = [name for name, ok in checks.items() if not ok]
    return {
        "ok": not missing,
        "missing": ", ".join(missing) or None,
        "bwrap": bwrap_version(),
        "uid": "pool" if os.geteuid() == 0 else "shared with the worker",
        "fresh_namespaces": fresh,
        "leftover_uids_swept": swept,
        "start_ms": round((time.perf_counter() - start) * 1000, 1),
    }
