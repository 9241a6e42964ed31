"""Resource limits of one sandboxed task and the sandbox's error types (torch- and numpy-free)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from compiler.errors import CompileError


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed task: rlimits set before bwrap starts, wall time by the parent.

    memory_bytes is RLIMIT_DATA (heap and private anonymous memory), not RLIMIT_AS: the CUDA build
    of torch maps 3.6 GB of address space just by importing. processes is RLIMIT_NPROC of the
    task's own uid (threads count too). output_files and output_bytes cap what the task may leave
    in its one writable host directory (/job/out: entries of any kind, and bytes on disk); the
    worker checks them while the task runs (`launcher.OUTPUT_CHECK_S`) and once after it.
    tmp_bytes and shm_bytes size the only other writable places, the private tmpfs /tmp and
    /dev/shm (a write past them fails ENOSPC); the root and /dev are read-only (EROFS).
    factory_packages are the packages a job's model.factory may name (besides its own project's
    modules): the server's model_factory_packages.
    """

    cpu_seconds: int = 120
    memory_bytes: int = 4 * 1024**3
    wall_seconds: float = 180.0
    file_bytes: int = 2 * 1024**3
    processes: int = 64
    output_files: int = 64
    output_bytes: int = 4 * 1024**3
    tmp_bytes: int = 512 * 1024**2
    shm_bytes: int = 64 * 1024**2
    factory_packages: tuple[str, ...] = ("torchvision", "timm", "transformers", "torchaudio")


DATA_LIMITS = SandboxLimits(cpu_seconds=24 * 3600, wall_seconds=600.0)


class SandboxUnavailable(CompileError):
    """The sandbox cannot be built on this worker, so tenant code is refused (fail closed)."""

    kind = "internal"

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"tenant code refused: this worker cannot build its sandbox ({missing}); "
            "the operator must fix the worker (see docs/sandbox.md)",
            {"sandbox": "unavailable", "missing": missing},
        )


def limits_dict(limits: SandboxLimits) -> dict[str, Any]:
    """JSON form of the limits (for summaries)."""
    return asdict(limits)
