"""The steps of the forked child that execs bwrap, before the exec: stage the binds (root
only), drop to the task's uid, set the rlimits and the death signal. Used by the launcher's own
fork (the fallback) and by the spawner helper's children: one place, small enough that the helper
(a lean `python -I -S`) imports nothing else of the sandbox for it."""

from __future__ import annotations

import ctypes
import os
import resource
import signal

from compiler.sandbox.limits import SandboxLimits

_CLONE_NEWNS, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20000, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1

# Loaded here, not in the forked child: dlopen there could wait on a lock another thread held.
LIBC = ctypes.CDLL(None, use_errno=True)


def enter(  # noqa: PLR0913 - what the forked child needs, computed before the fork
    uid: int | None, sources: list[str], staged: list[str], limits: SandboxLimits, parent: int
) -> None:
    """preexec_fn, in the forked child before exec'ing bwrap: stage the binds in a private mount
    namespace (root only), drop to the task's uid, set the rlimits the whole task inherits, and
    die with the worker from here on: bwrap's --die-with-parent only takes effect once bwrap
    runs, and a worker killed in between would leave it orphaned (the death signal is set after
    the uid drop, which clears it, and the parent checked after it, which closes the race)."""
    if uid is not None:
        check(LIBC.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        check(LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount private /")
        for source, target in zip(sources, staged, strict=True):
            check(
                LIBC.mount(source.encode(), target.encode(), None, _MS_BIND | _MS_REC, None),
                f"bind {source}",
            )
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    set_rlimits(limits)
    check(LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(1)  # the worker is gone already


def check(code: int, what: str) -> None:
    if code != 0:
        raise OSError(ctypes.get_errno(), f"sandbox staging failed: {what}")


def set_rlimits(limits: SandboxLimits) -> None:
    """preexec_fn, after the uid drop and before bwrap: limits inherited by the whole task."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    # RLIMIT_DATA (heap and private anonymous memory: what a model really allocates), not
    # RLIMIT_AS: the CUDA build of torch that torchvision needs maps 3.6 GB of library address
    # space at import, before any model code runs.
    resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
