"""The seccomp filter every sandbox runs under: a small classic-BPF program handed to bwrap.

Why hand-assembled rather than libseccomp: the program is a plain deny list (about fifty
instructions), so it needs no C library or binding on the worker, and every instruction can be
read and tested here. Layout: kill on a foreign architecture (and on the x32 ABI), EPERM for the
denied system calls, EPERM for `clone` with any namespace flag, ENOSYS for `clone3` (its flags
sit behind a pointer BPF cannot read; libc then falls back to `clone`), allow the rest.
"""

from __future__ import annotations

import errno
import platform
import struct

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data (little-endian low word)

# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACE_FLAGS = 0x7E020000

DENIED = (
    "setns unshare mount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig "
    "fsmount fspick mount_setattr ptrace process_vm_readv process_vm_writev pidfd_getfd "
    "keyctl add_key request_key bpf perf_event_open kexec_load kexec_file_load init_module "
    "finit_module delete_module open_by_handle_at name_to_handle_at userfaultfd swapon swapoff "
    "reboot acct settimeofday clock_settime adjtimex quotactl syslog vhangup fanotify_init "
    "lookup_dcookie io_uring_setup io_uring_enter io_uring_register iopl ioperm"
).split()

# (AUDIT_ARCH value, syscall numbers); asm/unistd_64.h and asm-generic/unistd.h.
_X86_64 = (
    0xC000003E,
    dict(
        setns=308, unshare=272, mount=165, umount2=166, pivot_root=155, chroot=161,
        move_mount=429, open_tree=428, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
        mount_setattr=442, ptrace=101, process_vm_readv=310, process_vm_writev=311,
        pidfd_getfd=438, keyctl=250, add_key=248, request_key=249, bpf=321,
        perf_event_open=298, kexec_load=246, kexec_file_load=320, init_module=175,
        finit_module=313, delete_module=176, open_by_handle_at=304, name_to_handle_at=303,
        userfaultfd=323, swapon=167, swapoff=168, reboot=169, acct=163, settimeofday=164,
        clock_settime=227, adjtimex=159, quotactl=179, syslog=103, vhangup=153,
        fanotify_init=300, lookup_dcookie=212, io_uring_setup=425, io_uring_enter=426,
        io_uring_register=427, iopl=172, ioperm=173, clone=56, clone3=435,
    ),
)  # fmt: skip
_AARCH64 = (
    0xC00000B7,
    dict(
        setns=268, unshare=97, mount=40, umount2=39, pivot_root=41, chroot=51, move_mount=429,
        open_tree=428, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442,
        ptrace=117, process_vm_readv=270, process_vm_writev=271, pidfd_getfd=438, keyctl=219,
        add_key=217, request_key=218, bpf=280, perf_event_open=241, kexec_load=104,
        kexec_file_load=294, init_module=105, finit_module=273, delete_module=106,
        open_by_handle_at=265, name_to_handle_at=264, userfaultfd=282, swapon=224,
        swapoff=225, reboot=142, acct=89, settimeofday=170, clock_settime=112, adjtimex=171,
        quotactl=60, syslog=116, vhangup=58, fanotify_init=262, lookup_dcookie=18,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427, clone=220, clone3=435,
    ),
)  # fmt: skip
_ARCHES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


class SeccompUnsupported(RuntimeError):
    """No filter is known for this machine's architecture."""


def syscall_numbers(machine: str | None = None) -> dict[str, int]:
    """Name -> number of the syscalls the filter mentions, for `machine` (default: this one)."""
    return dict(_arch(machine)[1])


def _arch(machine: str | None) -> tuple[int, dict[str, int]]:
    name = (machine or platform.machine()).lower()
    if name not in _ARCHES:
        raise SeccompUnsupported(f"no seccomp filter for the {name!r} architecture")
    return _ARCHES[name]


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None) -> bytes:
    """The filter as the raw `struct sock_filter[]` bytes bwrap's `--seccomp FD` reads."""
    audit_arch, numbers = _arch(machine)
    denied = sorted({numbers[name] for name in DENIED if name in numbers})
    x86 = audit_arch == _X86_64[0]
    head = [_ins(_LD_W_ABS, _OFF_ARCH), _ins(_JEQ_K, audit_arch, 1, 0)]
    head += [_ins(_RET_K, _RET_KILL_PROCESS), _ins(_LD_W_ABS, _OFF_NR)]
    # Checks, each jumping forward to one of the tail blocks below.
    checks: list[tuple[int, int, str]] = []  # (opcode, k, target label)
    if x86:
        checks.append((_JGE_K, 0x40000000, "kill"))  # the x32 ABI: numbers above 2**30
    checks += [(_JEQ_K, nr, "eperm") for nr in denied]
    checks += [(_JEQ_K, numbers["clone3"], "enosys"), (_JEQ_K, numbers["clone"], "clone")]
    tail = ["allow", "eperm", "enosys", "kill", "clone"]
    body_end = len(head) + len(checks)
    offset = {label: body_end + i for i, label in enumerate(tail)}
    program = list(head)
    for index, (code, k, label) in enumerate(checks):
        position = len(head) + index
        program.append(_ins(code, k, offset[label] - position - 1, 0))
    # The last check falls through to "allow", the first tail block.
    program += [
        _ins(_RET_K, _RET_ALLOW),
        _ins(_RET_K, _RET_ERRNO | errno.EPERM),
        _ins(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _ins(_RET_K, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JSET_K, CLONE_NAMESPACE_FLAGS, 0, 1),
        _ins(_RET_K, _RET_ERRNO | errno.EPERM),
        _ins(_RET_K, _RET_ALLOW),
    ]
    return b"".join(program)
