"""The hostile corpus: code a tenant uploads to reach outside its sandbox.

`ATTACKS` runs every attempt at once and reports what each one got as one JSON line prefixed with
REPORT; the tests check each attempt failed and that no secret shows in anything the tenant can
read back. Used at import of a model.py (compile worker) and in a make_batch (wafer worker).
"""

from __future__ import annotations

import json
import re
from typing import Any

from compiler.sandbox.launcher import python_roots

ATTACKS = r"""
import ctypes, errno, json, os, subprocess, sys

def _attempt(fn):
    try:
        return "GOT " + repr(fn())[:300]
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"[:300]

def _read(path):
    with open(path, "rb") as handle:
        return handle.read(4096)

def _syscall(number, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(number, *args) == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "succeeded"

def _setns_host_net():
    fd = os.open("/proc/1/ns/net", os.O_RDONLY)
    return _syscall(NR["setns"], fd, 0x40000000)

def _connect(port):
    import _socket
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(("127.0.0.1", port))
    return "connected"

def _spawn_daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", MARKER])
        os._exit(0)
    os.waitpid(pid, 0)
    return "spawned"

def _forks(count):
    made = 0
    for _ in range(count):
        try:
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", MARKER])
            made += 1
        except OSError:
            break
    return made

def _status():
    fields = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
    return {k: fields[k].strip() for k in ("Uid", "NoNewPrivs", "Seccomp", "CapEff")}

def run_attacks():
    report = {
        "proc_environ": [_attempt(lambda p=p: _read(f"/proc/{p}/environ")) for p in PIDS],
        "admin_token": _attempt(lambda: _read(DATA_DIR + "/admin.token")),
        "sam_db": _attempt(lambda: _read(DATA_DIR + "/sam.db")),
        "checkpoints": _attempt(lambda: os.listdir(DATA_DIR + "/checkpoints")),
        "artifacts": _attempt(lambda: os.listdir(DATA_DIR + "/artifacts")),
        "etc_passwd": _attempt(lambda: _read("/etc/passwd")),
        "root_listing": _attempt(lambda: sorted(os.listdir("/"))),
        "env": {k: v for k, v in os.environ.items() if k.startswith("SAM_")},
        "os_system": _attempt(lambda: os.system("id > /tmp/id.txt") or _read("/tmp/id.txt")),
        "subprocess": _attempt(lambda: subprocess.run(["/bin/sh", "-c", "id"], capture_output=True).stdout),
        "setns": _attempt(_setns_host_net),
        "unshare_net": _attempt(lambda: _syscall(NR["unshare"], 0x40000000)),
        "unshare_user": _attempt(lambda: _syscall(NR["unshare"], 0x10000000)),
        "clone_newns": _attempt(lambda: _syscall(NR["clone"], 0x20000 | 17, 0, 0, 0, 0)),
        "mount": _attempt(lambda: _syscall(NR["mount"], b"none", b"/tmp", b"tmpfs", 0, 0)),
        "ptrace": _attempt(lambda: _syscall(NR["ptrace"], 16, 1, 0, 0)),
        "bpf": _attempt(lambda: _syscall(NR["bpf"], 0, 0, 0)),
        "keyctl": _attempt(lambda: _syscall(NR["keyctl"], 0, 0, 0)),
        "connect": {str(p): _attempt(lambda p=p: _connect(p)) for p in PORTS},
        "status": _status(),
        "daemon": _attempt(_spawn_daemon),
        "forks": _attempt(lambda: _forks(FORKS)),
    }
    return "REPORT" + json.dumps(report)
"""


def attack_source(
    data_dir: str,
    pids: list[int],
    ports: list[int],
    marker: str,
    nr: dict[str, int],
    forks: int = 30,
) -> str:
    """The attack functions with the host facts an attacker would guess filled in."""
    facts = (
        f"DATA_DIR = {data_dir!r}\nPIDS = {pids!r}\nPORTS = {ports!r}\n"
        f"MARKER = {marker!r}\nNR = {nr!r}\nFORKS = {forks}\n"
    )
    return facts + ATTACKS


def parse_report(text: str) -> dict[str, Any]:
    """The report embedded in a job's error message."""
    found = re.search(r"REPORT(\{.*\})", text, re.S)
    assert found, f"no report in: {text[:2000]}"
    return json.loads(found.group(1))


def assert_contained(report: dict[str, Any], pool_uid: bool) -> None:
    """Every attempt failed (the sandbox held)."""
    refused = ("FileNotFoundError", "PermissionError", "OSError", "ConnectionRefusedError")
    for key in ("admin_token", "sam_db", "checkpoints", "artifacts", "etc_passwd", "subprocess"):
        assert report[key].startswith(refused), (key, report[key])
    for attempt in report["proc_environ"]:  # the worker's pid is not there; pid 1 is bwrap's
        assert attempt.startswith(refused) or "SAM_" not in attempt, attempt
    for key in ("setns", "unshare_net", "unshare_user", "clone_newns", "mount", "ptrace"):
        assert "Operation not permitted" in report[key] or "No such file" in report[key], (
            key,
            report[key],
        )
    for key in ("bpf", "keyctl"):
        assert "Operation not permitted" in report[key], (key, report[key])
    assert not report["os_system"].startswith("GOT b"), report["os_system"]  # no shell at all
    for port, attempt in report["connect"].items():
        assert not attempt.startswith("GOT"), (port, attempt)
    assert report["env"] == {}
    assert report["root_listing"].startswith("GOT")
    listing = eval(report["root_listing"][4:])  # noqa: S307 - a repr of a list of names
    allowed = {"dev", "etc", "job", "lib", "lib32", "lib64", "proc", "root", "sam", "tmp", "usr"}
    # plus the first component of the interpreter's and the venv's paths, wherever the checkout is
    allowed |= {root.parts[1] for root in python_roots() if len(root.parts) > 1}
    assert set(listing) <= allowed, listing
    status = report["status"]
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    assert int(status["CapEff"], 16) == 0
    if pool_uid:
        assert int(status["Uid"].split()[0]) >= 61000
