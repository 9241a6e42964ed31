"""Memory bounds of the worker processes themselves (issue 29).

- A wafer worker runs every job's steps in its own process, outside any sandbox: its data
  segment is capped with RLIMIT_DATA (`SAM_WAFER_WORKER_MEMORY_BYTES`; 0 = auto), so a step
  that outgrows the plan fails that job with a MemoryError (`host_oom`) instead of taking the
  machine, and the worker with it.
- A compile or wafer worker whose resident memory grew past `SAM_WORKER_RECYCLE_RSS_BYTES`
  after a task (issue 29: a compile worker went from 344 MB to 1.32 GB after a compile_oom and
  stayed there) is recycled gently: it takes no new task, finishes the ones it runs (Celery's
  warm shutdown), and exits 0; its supervisor (`sam up`, compose's restart policy, systemd)
  starts a fresh one. Celery's own max_memory_per_child needs the prefork pool; SAM's workers
  use threads, so the worker recycles itself the same way.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import threading
from typing import Any

log = logging.getLogger("sam.worker.recycle")

GiB = 1024**3
_BASE_BYTES = 2 * GiB  # the worker's own footprint beside its jobs (torch, numpy, Celery)
_recycling = threading.Event()


def rss_bytes() -> int:
    """This process's resident set now, in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def machine_memory_bytes() -> int:
    """The machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def wafer_worker_memory_bytes(setting: int, slots: int, job_bytes: int) -> int:
    """RLIMIT_DATA of a wafer worker: the setting, or for 0 its job slots x the per-job bound
    plus the worker's own 2 GiB, at most 90% of the machine's memory."""
    if setting > 0:
        return setting
    return min(slots * job_bytes + _BASE_BYTES, int(0.9 * machine_memory_bytes()))


def jobs_share(limit: int) -> int:
    """Of a wafer worker's RLIMIT_DATA `limit`, the bytes its jobs' checked plans may hold
    together: all but the worker's own footprint (at least half of it)."""
    return max(limit - _BASE_BYTES, limit // 2)


def limit_data(limit: int) -> int:
    """Set this process's soft RLIMIT_DATA to `limit` (never above the hard limit, which is left
    alone so a sandbox started from here can still set its own); returns the limit in force."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return soft


def install(limit: int) -> None:
    """Recycle this Celery worker after a task that leaves its RSS above `limit` (0 = never)."""
    if limit <= 0:
        return
    from celery.signals import task_postrun

    def after_task(**_: Any) -> None:
        recycle_if_grown(limit)

    task_postrun.connect(after_task, weak=False)


def recycle_if_grown(limit: int) -> bool:
    """Start a warm shutdown of this worker if its RSS is above `limit`; True if it did."""
    rss = rss_bytes()
    if rss <= limit or _recycling.is_set():
        return False
    _recycling.set()
    log.warning(
        "worker RSS %.0f MiB is above SAM_WORKER_RECYCLE_RSS_BYTES (%.0f MiB): recycling it "
        "(no new task; the running ones finish, then it exits to be started afresh)",
        rss / 2**20,
        limit / 2**20,
    )
    os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown
    return True
