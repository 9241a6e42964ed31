"""Starting and killing one bubblewrap sandbox (the only module that knows bwrap's flags).

A task runs as `bwrap ... python -c <compiler.sandbox.child.run()> /job`, with:
- its own uid: a root worker leases a uid from a pool (SAM_SANDBOX_UID_BASE, default 61000,
  SAM_SANDBOX_UID_COUNT, default 64; a flock per uid shared by every worker on the machine) and
  drops to it before exec'ing bwrap, so RLIMIT_NPROC counts only this task's processes and the
  task owns no file of the host; a non-root worker runs it under its own uid;
- new user (no further ones), mount, PID, IPC, UTS, cgroup and network namespaces, every
  capability dropped, no_new_privs, a new session, --die-with-parent and the seccomp filter of
  `compiler.sandbox.seccomp`;
- a root file system holding only /usr/lib (no shells, no /usr/bin), the Python runtime and its
  site-packages read-only, SAM's `compiler` package read-only at /sam/compiler, the job's files
  read-only at /job/src, its task at /job/ctl, one writable output directory /job/out and a
  private tmpfs /tmp. A root worker first stages those host directories, in a private mount
  namespace of the forked child, at /run/sam-sandbox/stage/N, because bwrap resolves its
  sources as the sandbox uid, which may not traverse their parents (/root/.pyenv under a 0700
  /root here; bwrap's --bind-fd does not help: the kernel still refuses that uid the path);
- rlimits on address space, CPU seconds, file size, processes and core dumps; an environment
  with no secret;
- death with the worker: PR_SET_PDEATHSIG from the fork on, then bwrap's own; `Running.kill`
  returns only once the sandbox's init (and so every process of its PID namespace) is dead.

The fork that stages, drops the uid and sets the limits (`enter.enter`) happens in the worker's
spawner helper (`compiler.sandbox.spawner`), not in the worker: with a preexec step subprocess
cannot use vfork, and forking a worker with torch loaded was the largest cost of a start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from compiler.sandbox import options, seccomp, spawner
from compiler.sandbox.enter import enter as enter_child
from compiler.sandbox.limits import SandboxLimits, SandboxUnavailable
from compiler.sandbox.uids import kill_uid, lease_uid, release_uid
from wse_sim import ops as sim_ops

COMPILER_DIR = Path(__file__).resolve().parent.parent
# The `sam` package (client/sam: the Runner, torch-free, importing nothing else of the client).
SAM_PACKAGE_DIR = COMPILER_DIR.parent / "client" / "sam"
# The op classes the compiler imports (a module of plain data, no imports): bound alone at
# /sam/wse_sim/ops.py, so the child imports it as a namespace package without the simulator.
OP_CLASSES_FILE = Path(sim_ops.__file__ or "").resolve()
log = logging.getLogger("sam.sandbox")
_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32")
_LIB_LINKS = ("/lib", "/lib64", "/lib32")


def bwrap_path() -> str:
    """The bwrap binary: the sandbox.bwrap setting, else the one on PATH, else /usr/bin/bwrap."""
    return options.current().bwrap or _bwrap_on_path() or "/usr/bin/bwrap"


@functools.cache
def _bwrap_on_path() -> str | None:
    return shutil.which("bwrap")


def child_env() -> dict[str, str]:
    """The whole environment of sandboxed code: no SAM_* variable, no secret."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        # The sandbox's own interpreter runs isolated (-I) and sets sys.path itself
        # (`jobdir.child_main`); this is for interpreters the tenant code starts.
        "PYTHONPATH": ":".join(["/sam", *site_packages()]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
    }


@dataclass
class Mount:
    """A host path bound into the sandbox (by file descriptor)."""

    host: Path
    dest: str
    writable: bool = False


@dataclass
class Running:
    """A started sandbox: its outer bwrap process, the uid it runs as and a pidfd of its init."""

    proc: subprocess.Popen[bytes] | spawner.Spawned
    uid: int | None
    started_fd: int = -1
    _lock: IO[bytes] | None = field(default=None, repr=False)
    _init_fd: int = -1
    _proc_fd: int = -1
    _killed: bool = False

    def watch(self, init_pid: int | None) -> None:
        """Hold pidfds of bwrap and of the sandbox's init (PID 1 of its namespace): waiting needs
        no polling loop, and the init's exit proves every process of the task is gone (the
        kernel kills a PID namespace's processes, and waits for them, before its init is dead)."""
        with contextlib.suppress(OSError):
            if isinstance(self.proc, spawner.Spawned):
                self._proc_fd = os.dup(self.proc.pidfd)  # taken before bwrap could be reaped
            else:
                self._proc_fd = os.pidfd_open(self.proc.pid)
        if init_pid is None:
            return
        try:
            fd = os.pidfd_open(init_pid)
        except OSError:
            return  # already gone (an empty task), or bwrap failed: kill() sweeps by uid
        if _parent_pid(init_pid) != self.proc.pid:
            os.close(fd)  # the pid was reused already: not ours
            return
        self._init_fd = fd

    def wait(self, timeout: float | None = None) -> int:
        """Wait for bwrap to exit, at most `timeout` s (subprocess.TimeoutExpired)."""
        if self._proc_fd >= 0 and self.proc.returncode is None:
            ready = select.select([self._proc_fd], [], [], timeout)[0]
            if not ready:
                raise subprocess.TimeoutExpired(self.proc.args, timeout or 0.0)
        return self.proc.wait(timeout)

    def was_built(self) -> bool:
        """Whether the command started inside a built sandbox: it writes a byte on the fd named
        by `--started-fd` before any tenant code runs, so tenant code cannot fake its absence.
        Without it, bwrap (or the runtime it had to exec) failed: the sandbox is broken."""
        if self.started_fd < 0:
            return False
        os.set_blocking(self.started_fd, False)
        try:
            return bool(os.read(self.started_fd, 1))
        except BlockingIOError:
            return False

    def signal_kill(self) -> None:
        """SIGKILL the sandbox's init and bwrap, from any thread (kill() reaps them)."""
        if self._killed:
            return
        if self._init_fd >= 0:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.proc.send_signal(signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the sandbox's init and bwrap: the kernel kills every process of the PID
        namespace with its init. Returns once they are all dead (the init's pidfd says so; a
        uid sweep where there is none), then frees the uid."""
        if self._killed:
            return
        self._killed, gone = True, False
        if self._init_fd >= 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait()
        if self._init_fd >= 0:
            gone = bool(select.select([self._init_fd], [], [], 10.0)[0])
        for fd in (self._init_fd, self._proc_fd):
            if fd >= 0:
                os.close(fd)
        self._init_fd = self._proc_fd = -1
        if self.uid is not None and not gone:
            kill_uid(self.uid)
            gone = True
        if self._lock is not None:
            release_uid(self._lock, clean=gone)  # the uid may serve the next task
            self._lock = None

    def close(self) -> None:
        """Kill it (if still running) and close the started pipe."""
        self.kill()
        if self.started_fd >= 0:
            os.close(self.started_fd)
            self.started_fd = -1


OUTPUT_CHECK_S = 0.2


def output_problem(out: Path, limits: SandboxLimits) -> str | None:
    """Why the task's output directory is over its caps (entries of any kind, counted through
    subdirectories without following links, and bytes on disk), or None."""
    count, used, todo = 0, 0, [str(out)]
    while todo:
        try:
            entries = os.scandir(todo.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                count += 1
                if count > limits.output_files:
                    return (
                        f"the task left more than {limits.output_files} files in its output "
                        "directory (the cap on output files); write fewer files"
                    )
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    todo.append(entry.path)
    if used > limits.output_bytes:
        return (
            f"the task left {used} bytes in its output directory, over its cap of "
            f"{limits.output_bytes} bytes; write less"
        )
    return None


def wait_checked(running: Running, out: Path, limits: SandboxLimits) -> tuple[int, str | None]:
    """Wait for a task that only writes files (at most limits.wall_seconds, else
    subprocess.TimeoutExpired), checking its output directory every OUTPUT_CHECK_S seconds from
    this thread (no watcher thread to start and join: a short task pays nothing for the check),
    and kill the sandbox as soon as the directory is over its caps. Returns bwrap's exit status
    and the first problem seen, or the one the directory shows once the task is done."""
    deadline = time.monotonic() + limits.wall_seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise subprocess.TimeoutExpired(running.proc.args, limits.wall_seconds)
        try:
            returncode = running.wait(min(OUTPUT_CHECK_S, remaining))
        except subprocess.TimeoutExpired:
            problem = output_problem(out, limits)
            if problem is None:
                continue
            running.signal_kill()
            return running.wait(), problem
        return returncode, output_problem(out, limits)


class OutputGuard:
    """Checks a running task's output directory every OUTPUT_CHECK_S seconds from a thread and
    kills the sandbox as soon as it is over its caps (a flood of files stops within one
    interval): for a task whose caller is busy meanwhile (reading a batch stream)."""

    def __init__(self, running: Running, out: Path, limits: SandboxLimits) -> None:
        self.problem: str | None = None
        self._running, self._out, self._limits = running, out, limits
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sam-sandbox-out", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(OUTPUT_CHECK_S):
            problem = output_problem(self._out, self._limits)
            if problem is not None:
                self.problem = problem
                self._running.signal_kill()
                return

    def stop(self) -> str | None:
        """Stop checking; the first problem seen, or the one the directory shows now."""
        self._stop.set()
        self._thread.join()
        if self.problem is None:
            self.problem = output_problem(self._out, self._limits)
        return self.problem


def _parent_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def start(
    argv: list[str],
    mounts: list[Mount],
    limits: SandboxLimits,
    stdout: Any,
    stderr: Any,
    stdin: Any = subprocess.DEVNULL,
) -> Running:
    """Start `argv` (run inside, with `--started-fd N` appended) in a new sandbox; raises
    SandboxUnavailable when it cannot."""
    bwrap = bwrap_path()
    if not os.access(bwrap, os.X_OK):
        raise SandboxUnavailable(
            f"bubblewrap not found at {bwrap}: install the 'bubblewrap' package "
            "or point SAM_SANDBOX_BWRAP at bwrap"
        )
    try:
        program = _filter()
    except seccomp.SeccompUnsupported as exc:
        raise SandboxUnavailable(str(exc)) from None
    uid, lock = lease_uid()
    try:
        return _launch(bwrap, program, uid, lock, argv, mounts, limits, (stdin, stdout, stderr))
    except BaseException as exc:
        if lock is not None:
            lock.close()
        if isinstance(exc, (OSError, subprocess.SubprocessError)):
            raise SandboxUnavailable(f"bwrap could not be started: {exc}") from exc
        raise


@functools.cache
def _filter() -> bytes:
    return seccomp.build_filter()


def _launch(  # noqa: PLR0913 - the pieces `start` gathered
    bwrap: str,
    program: bytes,
    uid: int | None,
    lock: IO[bytes] | None,
    argv: list[str],
    mounts: list[Mount],
    limits: SandboxLimits,
    stdio: tuple[Any, Any, Any],
) -> Running:
    fds: list[int] = []  # closed here once bwrap has them
    started_read, started_write = os.pipe()
    info_read, info_write = os.pipe()
    fds += [started_write, info_write]
    try:
        binds = _binds(mounts)
        staged = _stage_dirs(binds) if uid is not None else []
        args = [bwrap, *_namespace_args(), "--seccomp", str(_memfd(program, fds))]
        args += ["--info-fd", str(info_write), *_filesystem_args(binds, staged, limits)]
        # the job's project (or files) is the working directory, as on the user's machine
        cwd = "/job/src" if any(m.dest == "/job/src" for m in mounts) else "/tmp"
        args += ["--chdir", cwd, "--", *argv, "--started-fd", str(started_write)]
        for mount in mounts:
            if mount.writable and uid is not None:
                os.chown(mount.host, uid, uid)
        sources = [str(b.host) for b in binds]
        proc = _spawn(args, (uid, sources, staged, limits), stdio, fds)
    except BaseException:
        os.close(started_read)
        os.close(info_read)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    running = Running(proc, uid, started_read, lock)
    running.watch(_init_pid(info_read))
    return running


def _spawn(
    args: list[str],
    enter: tuple[int | None, list[str], list[str], SandboxLimits],
    stdio: tuple[Any, Any, Any],
    fds: list[int],
) -> subprocess.Popen[bytes] | spawner.Spawned:
    """Start bwrap through the worker's spawner helper (no fork of this process), or, where the
    helper cannot run, fork it here with `enter.enter` as preexec_fn."""
    uid, sources, staged, limits = enter
    if options.current().spawner:
        opened: list[int] = []
        try:
            fd_in, stdin = _stdin_fd(stdio[0], opened)
            fd_out = 1 if stdio[1] is None else _fileno(stdio[1])
            fd_err = 2 if stdio[2] is None else _fileno(stdio[2])
            entered = (uid, sources, staged, dataclasses.astuple(limits))
            try:
                proc = spawner.spawn(args, child_env(), entered, [fd_in, fd_out, fd_err], fds)
            except spawner.SpawnerUnavailable as exc:
                log.warning("%s; forking bwrap from the worker instead", exc)
            else:
                proc.stdin = stdin
                return proc
            if stdin is not None:
                stdin.close()
        finally:
            for fd in opened:
                os.close(fd)
    parent = os.getpid()
    return subprocess.Popen(
        args,
        env=child_env(),
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        pass_fds=fds,
        preexec_fn=lambda: enter_child(uid, sources, staged, limits, parent),
    )


def _stdin_fd(stdin: Any, opened: list[int]) -> tuple[int, IO[bytes] | None]:
    """The descriptor the task reads as stdin, and the writable end when it is a new pipe."""
    if stdin == subprocess.PIPE:
        read, write = os.pipe()
        opened.append(read)
        return read, os.fdopen(write, "wb")
    if stdin == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDONLY)
        opened.append(fd)
        return fd, None
    return (0 if stdin is None else _fileno(stdin)), None


def _fileno(stream: Any) -> int:
    return stream if isinstance(stream, int) else int(stream.fileno())


def _namespace_args() -> list[str]:
    return [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sam-sandbox",
    ]


def _memfd(data: bytes, fds: list[int]) -> int:
    fd = os.memfd_create("sam-seccomp", 0)
    fds.append(fd)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _binds(mounts: list[Mount]) -> list[Mount]:
    """Every host directory or file the sandbox sees, read-only unless the mount says so."""
    return [*_runtime_binds(), *mounts]


@functools.cache
def _runtime_binds() -> tuple[Mount, ...]:
    """The binds every sandbox shares (the libraries, the Python runtime, SAM's compiler): the
    same for the life of the worker, so looked up once."""
    binds = [Mount(Path(p), p) for p in _LIB_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    binds += [Mount(Path(p), p) for p in _LIB_LINKS if os.path.isdir(p) and not os.path.islink(p)]
    if os.path.isfile("/etc/ld.so.cache"):
        binds.append(Mount(Path("/etc/ld.so.cache"), "/etc/ld.so.cache"))
    binds += [Mount(root, str(root)) for root in python_roots()]
    binds.append(Mount(COMPILER_DIR, "/sam/compiler"))
    if SAM_PACKAGE_DIR.is_dir():  # `from sam import Runner` in a runner job's script
        binds.append(Mount(SAM_PACKAGE_DIR, "/sam/sam"))
    binds.append(Mount(OP_CLASSES_FILE, "/sam/wse_sim/ops.py"))
    return tuple(binds)


def _filesystem_args(binds: list[Mount], staged: list[str], limits: SandboxLimits) -> list[str]:
    """Every writable place is capped: /tmp and /dev/shm are tmpfs of tmp_bytes and shm_bytes
    (tmpfs pages are the host's shared memory), the one writable bind is /job/out (checked by
    `output_problem`), and once everything is mounted the root and /dev are remounted
    read-only (bwrap's root and /dev are tmpfs of their own, otherwise writable without a cap:
    issue 29 wrote 3 GiB under /sam and 3 GiB into /dev/shm)."""
    args = ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    args += ["--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]
    for link in _LIB_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
    for index, bind in enumerate(binds):
        source = staged[index] if staged else str(bind.host)
        args += ["--bind" if bind.writable else "--ro-bind", source, bind.dest]
    return [*args, "--remount-ro", "/dev", "--remount-ro", "/"]


def _init_pid(info_fd: int) -> int | None:
    """The host pid of the sandbox's init (PID 1 of its namespace), from bwrap's --info-fd; None
    when bwrap died before it said (the sandbox was not built)."""
    data = b""
    try:
        while not data.rstrip().endswith(b"}"):
            chunk = os.read(info_fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(info_fd)
    try:
        pid = json.loads(data)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


_STAGE = Path("/run/sam-sandbox/stage")


_staged: set[str] = set()


def _stage_dirs(binds: list[Mount]) -> list[str]:
    """Mount points (created once, root-owned, 0755) where a root worker's child stages binds:
    a directory for a directory, a file for a file."""
    paths = []
    for index, bind in enumerate(binds):
        is_dir = bind.host.is_dir()
        path = _STAGE / f"{index}{'' if is_dir else '.file'}"
        paths.append(str(path))
        if str(path) in _staged:
            continue
        if is_dir:
            path.mkdir(mode=0o755, parents=True, exist_ok=True)
        else:
            _STAGE.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.touch(mode=0o644, exist_ok=True)
        for parent in (_STAGE.parent, _STAGE):
            os.chmod(parent, 0o755)
        _staged.add(str(path))
    return paths


@functools.cache
def python_roots() -> list[Path]:
    """The interpreter's installation and the environment (venv) holding its site-packages."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    return sorted(r for r in roots if not any(o != r and o in r.parents for o in roots))


@functools.cache
def site_packages() -> list[str]:
    """The environment's site-packages directories (inside python_roots)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def python_executable() -> str:
    """The interpreter path as seen inside the sandbox (the same path as outside)."""
    return sys.executable
