"""A small helper process that forks bwrap for the worker, so the worker itself never forks.

Staging the binds and dropping to the pool uid must happen in a forked child before bwrap runs
(`enter.enter`): with a preexec step Python's subprocess cannot use vfork, and forking a
worker that has torch imported (hundreds of MB mapped) cost more than the rest of a sandbox
start together. So each worker process starts this helper once (a lean `python -I -S`, started
with vfork from a thread that lives as long as the worker: the helper's death signal follows
that thread) and hands it every launch over a socket pair: the command, its environment and
its descriptors (SCM_RIGHTS). The helper forks (cheap: it is small), runs the same `_enter` in
the child (staging, uid drop, rlimits, death signal) and execs bwrap; it sends back a pidfd
of bwrap, and bwrap's exit status on a pipe of the launch once it has reaped it.

Lifetimes: the helper dies with the worker (PR_SET_PDEATHSIG, parent checked after it), each
bwrap with the helper (the death signal `_enter` sets, then bwrap's --die-with-parent), so a
SIGKILLed worker still takes every sandbox with it. Nothing of a task runs in the helper: it
only forks, and its children exec bwrap. Where the helper cannot be started the launcher forks
bwrap itself as before (`launcher._launch`).
"""

from __future__ import annotations

import array
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from compiler.sandbox import enter
from compiler.sandbox.limits import SandboxLimits

_MAX_FDS = 16
_lock = threading.Lock()
_helper: _Helper | None = None


class Spawned:
    """bwrap started by the helper: the parts of subprocess.Popen the launcher uses."""

    def __init__(self, args: list[str], pid: int, pidfd: int, status_fd: int) -> None:
        self.args, self.pid, self.pidfd = args, pid, pidfd
        self.returncode: int | None = None
        self.stdin: IO[bytes] | None = None
        self._status = status_fd
        self._reading = threading.Lock()  # one thread reads the status (as Popen's wait lock)

    def poll(self) -> int | None:
        if not self._reading.acquire(blocking=False):
            return self.returncode  # another thread is reading it
        try:
            return self._collect(0)
        finally:
            self._reading.release()

    def wait(self, timeout: float | None = None) -> int:
        code = None
        if self._reading.acquire(timeout=-1 if timeout is None else timeout):
            try:
                code = self._collect(timeout)
            finally:
                self._reading.release()
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                return None
            data = os.read(self._status, 32)
            # No status: the helper died (with the worker's other sandboxes killed with it).
            self.returncode = int(data) if data else -signal.SIGKILL
            os.close(self._status)
            os.close(self.pidfd)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class SpawnerUnavailable(OSError):
    """The helper process could not be started (the launcher then forks bwrap itself)."""


class _Helper:
    def __init__(self) -> None:
        self.owner = os.getpid()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = str(Path(__file__).resolve().parent.parent.parent)
        program = (
            f"import sys; sys.path[:0] = [{root!r}]; "
            "from compiler.sandbox import spawner; spawner.serve()"
        )
        argv = [sys.executable, "-I", "-S", "-B", "-c", program, str(theirs.fileno())]
        argv.append(str(self.owner))
        started: list[subprocess.Popen[bytes] | BaseException] = []
        ready = threading.Event()

        def keep() -> None:  # the helper's death signal follows this thread: it never ends
            try:
                started.append(subprocess.Popen(argv, pass_fds=[theirs.fileno()]))
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                started.append(exc)
            ready.set()
            threading.Event().wait()

        threading.Thread(target=keep, name="sam-sandbox-spawner", daemon=True).start()
        ready.wait()
        theirs.close()
        if isinstance(started[0], BaseException):
            self.sock.close()
            raise SpawnerUnavailable(f"the sandbox spawner could not start: {started[0]}")
        self.proc = started[0]

    def spawn(self, request: dict[str, Any], fds: list[int]) -> tuple[int, int]:
        """(pid, pidfd) of the started command; OSError when it could not be started."""
        self.sock.sendmsg(
            [marshal.dumps(request)],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
        )
        data, ancdata, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(4))
        if not data:
            raise OSError("the sandbox spawner exited")
        reply = marshal.loads(data)
        if "error" in reply:
            raise OSError(reply["errno"], reply["error"])
        return reply["pid"], _received(ancdata)[0]


def spawn(
    args: list[str],
    env: dict[str, str],
    enter: tuple[Any, ...],
    stdio: list[int],
    pass_fds: list[int],
) -> Spawned:
    """Start `args` through this process's helper (started on first use). `enter`: the arguments
    of `enter.enter` but the parent; `stdio`: descriptors for 0, 1 and 2; `pass_fds` keep
    their numbers. Raises OSError when the helper or the command cannot be started."""
    global _helper
    status_read, status_write = os.pipe()
    try:
        with _lock:
            if _helper is None or _helper.owner != os.getpid() or _helper.proc.poll() is not None:
                _helper = _Helper()
            request = {"args": args, "env": env, "enter": enter, "targets": [0, 1, 2, *pass_fds]}
            pid, pidfd = _helper.spawn(request, [*stdio, *pass_fds, status_write])
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    return Spawned(args, pid, pidfd, status_read)


def _received(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return list(fds)


# --- the helper process -------------------------------------------------------------------


def serve() -> None:
    """The helper's main loop (`python -I -S -c ... spawner.serve()` SOCKET_FD WORKER_PID)."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    worker = int(sys.argv[2])
    enter.check(enter.LIBC.prctl(enter.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() != worker:
        os._exit(1)
    children: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, status descriptor)
    while True:
        ready: list[int] = select.select([sock.fileno(), *children], [], [])[0]
        for fd in ready:
            if fd == sock.fileno():
                continue
            pid, status = children.pop(fd)
            _, code = os.waitpid(pid, 0)
            try:
                os.write(status, str(os.waitstatus_to_exitcode(code)).encode())
            except OSError:
                pass  # the worker stopped waiting for it
            os.close(status)
            os.close(fd)
        if sock.fileno() in ready:
            data, ancdata, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(_MAX_FDS * 4))
            if not data:
                os._exit(0)  # the worker is gone
            fds = _received(ancdata)
            try:
                pidfd, pid = _fork(marshal.loads(data), fds)
            except OSError as exc:
                for received in fds:
                    os.close(received)
                reply = {"error": str(exc.strerror or exc), "errno": exc.errno or 0}
                sock.sendmsg([marshal.dumps(reply)])
                continue
            children[pidfd] = (pid, fds[-1])
            for received in fds[:-1]:
                os.close(received)
            sock.sendmsg(
                [marshal.dumps({"pid": pid})],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))],
            )


def _fork(request: dict[str, Any], fds: list[int]) -> tuple[int, int]:
    """Fork, set the child up as `enter.enter` says and exec; (pidfd, pid), or OSError with
    what went wrong before the exec."""
    err_read, err_write = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            err_write = _arrange(fds[:-1], request["targets"], err_write)
            uid, sources, staged, limits = request["enter"]
            enter.enter(uid, sources, staged, SandboxLimits(*limits), parent)
            os.execve(request["args"][0], request["args"], request["env"])
        except BaseException as exc:  # noqa: BLE001 - reported to the worker, never raised here
            errno = getattr(exc, "errno", None) or 0
            message = str(getattr(exc, "strerror", "") or exc)
            os.write(err_write, marshal.dumps((errno, message)))
        os._exit(127)
    os.close(err_write)
    chunks = []
    while chunk := os.read(err_read, 4096):
        chunks.append(chunk)
    os.close(err_read)
    if chunks:
        os.waitpid(pid, 0)
        errno, message = marshal.loads(b"".join(chunks))
        raise OSError(errno, message)
    return os.pidfd_open(pid), pid


def _arrange(fds: list[int], targets: list[int], err: int) -> int:
    """In the forked child: each received descriptor at its target number and every other one
    closed but the error pipe (close-on-exec), whose new number is returned."""
    import fcntl

    high = max(targets) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, high) for fd in fds]
    err = fcntl.fcntl(err, fcntl.F_DUPFD_CLOEXEC, high)
    for fd, target in zip(moved, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
    for fd in range(high):
        if fd not in targets:
            try:
                os.close(fd)
            except OSError:
                pass
    os.closerange(high, err)
    os.closerange(err + 1, 1 << 16)
    return err
