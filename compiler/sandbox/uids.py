"""The pool of uids sandboxes run as (a root worker only), and sweeping a uid's processes.

A uid serves one sandbox at a time: a flock per uid under /run/sam-sandbox/uids, shared by every
worker on the machine, is held from the start of a task until its processes are dead. A uid that
belongs to an account is never used, since its processes are swept. A worker that is not root
has no pool: it refuses tenant code unless the operator set sandbox.allow_shared_uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
import time
from pathlib import Path
from typing import IO

from compiler.sandbox import options
from compiler.sandbox.limits import SandboxUnavailable


def _pool() -> range:
    found = options.current()
    return range(found.uid_base, found.uid_base + found.uid_count)


def _lock_dir() -> Path:
    path = Path("/run/sam-sandbox/uids")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != 0 or info.st_mode & 0o022:
        raise SandboxUnavailable(f"{path} must be a directory owned by root, mode 0700")
    return path


def lease_uid() -> tuple[int | None, IO[bytes] | None]:
    """(uid, lock) of a free pool uid when running as root; (None, None) for a worker that is not
    root and whose operator allowed sandboxes to share its uid; SandboxUnavailable otherwise."""
    if os.geteuid() != 0:
        if options.current().allow_shared_uid:
            return None, None
        raise SandboxUnavailable(shared_uid_refusal())
    capabilities = _capabilities()
    missing = [name for bit, name in _ROOT_CAPS.items() if not capabilities >> bit & 1]
    if missing:
        raise SandboxUnavailable(
            f"the worker runs as root without the capabilities {', '.join(missing)} it needs "
            "to drop the sandbox to a pool uid; run it with them, or as a plain user"
        )
    directory = _lock_dir()
    for uid in _pool():
        if _uid_has_account(uid):
            continue  # never a real user's uid: its processes would be swept
        handle = open(directory / f"{uid}.lock", "ab")  # noqa: SIM115 - held until kill()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        if os.fstat(handle.fileno()).st_size:
            kill_uid(uid)  # its last holder died mid-task: sweep its leftovers
        handle.write(b"in use\n")  # cleared by release_uid once the task's processes are dead
        handle.flush()
        return uid, handle
    raise SandboxUnavailable(
        f"all {len(_pool())} sandbox uids are busy; raise SAM_SANDBOX_UID_COUNT"
    )


def shared_uid_refusal() -> str:
    """Why a worker that is not root refuses tenant code, and what the operator can do."""
    return (
        f"the worker runs as uid {os.geteuid()}, not root, so the sandbox cannot get a uid of its "
        "own and tenant code would share the worker's (it could signal, ptrace or read the "
        "worker); run SAM's workers (or `sam up`) as root, or accept that risk with "
        "sandbox.allow_shared_uid (SAM_SANDBOX_ALLOW_SHARED_UID=1)"
    )


def release_uid(lock: IO[bytes], clean: bool) -> None:
    """Free a leased uid; `clean` when none of its processes is left, else the next lease sweeps
    it first."""
    if clean:
        os.ftruncate(lock.fileno(), 0)
    lock.close()


_ROOT_CAPS = {
    0: "CAP_CHOWN",
    1: "CAP_DAC_OVERRIDE",
    5: "CAP_KILL",
    6: "CAP_SETGID",
    7: "CAP_SETUID",
}


def _capabilities() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def _uid_has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def uid_processes(uid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose real uid is `uid`."""
    return processes_by_uid().get(uid, [])


def processes_by_uid() -> dict[int, list[int]]:
    """Real uid -> pids of live processes, from one pass over /proc."""
    by_uid: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        zombie = fields.get("State", "").strip().startswith("Z")  # dead, waits for its reaper
        if not zombie:
            by_uid.setdefault(int(fields.get("Uid", "-1 0").split()[0]), []).append(int(entry))
    return by_uid


def sweep_unleased() -> int:
    """Kill the processes of pool uids no worker holds (left by a worker that died while its
    sandboxes ran, since bwrap's --die-with-parent does not always reach them); how many uids."""
    if os.geteuid() != 0:
        return 0
    directory, swept = _lock_dir(), 0
    busy = processes_by_uid()
    for uid in _pool():
        if uid not in busy or _uid_has_account(uid):
            continue
        with open(directory / f"{uid}.lock", "ab") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live sandbox of some worker
            kill_uid(uid)
            os.ftruncate(handle.fileno(), 0)
            swept += 1
    return swept


def kill_uid(uid: int, rounds: int = 20) -> None:
    """SIGKILL every process of a pool uid (it belongs to no one else) until none is left."""
    for _ in range(rounds):
        pids = uid_processes(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
