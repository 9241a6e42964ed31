"""A wafer worker's host memory, reserved job by job (issue 29).

Every job's artifact is checked before it runs (`compiler.artifact_check`), which plans the host
memory its steps hold and refuses one above SAM_WAFER_JOB_MEMORY_BYTES. The worker's RLIMIT_DATA
bounds the whole process, but it is capped at 90% of the machine's memory, below its job slots x
the per-job bound on most machines: several big (honest) jobs together could pass it, and the
MemoryError would then hit whichever job's thread allocated next, maybe another tenant's.

So each job reserves its planned bytes here before it loads, and releases them when it ends:
the jobs running on a worker never plan more than the worker has for jobs (its limit less its
own footprint). A job whose plan does not fit beside the others waits for them (its lease is
kept meanwhile), and fails `host_oom` only if it waited `WAIT_S` or could never fit. A job's
own failure stays its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from compiler.errors import HostOOM

# How long a job waits for the worker's other jobs to free host memory before it fails.
WAIT_S = 600.0


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


class HostMemory:
    """The bytes a worker's jobs may plan to hold together (None: no bound), and who holds what."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget
        self._held: dict[str, int] = {}
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        """Bytes the running jobs have reserved."""
        with self._changed:
            return sum(self._held.values())

    def reserve(
        self,
        key: str,
        nbytes: int,
        *,
        wait_s: float = WAIT_S,
        waiting: Callable[[str], None] | None = None,
    ) -> None:
        """Hold `nbytes` for `key` (one run of a job), waiting while the others hold too much;
        `waiting` is told once, in words, why it waits. HostOOM if it cannot fit."""
        budget = self.budget
        if budget is not None and nbytes > budget:
            raise HostOOM(
                f"the job plans {_size(nbytes)} of host memory, more than this wafer worker has "
                f"for all its jobs ({_size(budget)}: its RLIMIT_DATA, SAM_WAFER_WORKER_MEMORY_BYTES, "
                "less its own 2 GiB); ask the operator for a bigger worker or shrink the job "
                "(batch size, model width)"
            )
        deadline = time.monotonic() + wait_s
        told = False
        with self._changed:
            while budget is not None and sum(self._held.values()) + nbytes > budget:
                held = sum(self._held.values())
                if not told and waiting is not None:
                    waiting(
                        f"waiting for {_size(nbytes)} of host memory: this wafer worker's other "
                        f"jobs hold {_size(held)} of the {_size(budget)} it has for jobs"
                    )
                    told = True
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HostOOM(
                        f"waited {wait_s:.0f} s for {_size(nbytes)} of host memory; this wafer "
                        f"worker's other jobs still hold {_size(held)} of the {_size(budget)} "
                        "it has for jobs: resubmit, or ask for a smaller job's share"
                    )
                self._changed.wait(min(left, 1.0))
            self._held[key] = nbytes

    def release(self, key: str) -> None:
        """Give back what `key` reserved (nothing if it reserved nothing)."""
        with self._changed:
            if self._held.pop(key, None) is not None:
                self._changed.notify_all()
