"""Issue 29: a wafer worker's memory per job is bounded, so one job's failure is its own.

Each job's checked plan is within SAM_WAFER_JOB_MEMORY_BYTES, but the worker's RLIMIT_DATA is
capped at 90% of the machine: several big jobs together could pass it, and the MemoryError would
hit whichever job allocated next, maybe another tenant's. Each run now reserves its planned
bytes from the worker's share for jobs before it loads (`sam_worker.host_memory`); one that does
not fit beside the others waits, and fails host_oom only when it never could or waited too long.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from compiler.errors import HostOOM
from sam_worker.host_memory import HostMemory
from sam_worker.recycle import jobs_share

MiB = 1 << 20
GiB = 1 << 30


def test_runs_that_fit_together_run_together() -> None:
    memory = HostMemory(budget=100 * MiB)
    memory.reserve("a", 40 * MiB)
    memory.reserve("b", 60 * MiB, wait_s=0)
    assert memory.held == 100 * MiB
    memory.release("a")
    memory.release("a")  # twice is harmless
    assert memory.held == 60 * MiB


def test_a_run_that_does_not_fit_waits_for_another_to_end() -> None:
    memory = HostMemory(budget=100 * MiB)
    memory.reserve("big", 70 * MiB)
    told: list[str] = []
    done = threading.Event()

    def second() -> None:
        memory.reserve("next", 50 * MiB, wait_s=30, waiting=told.append)
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    assert not done.is_set()  # the first job's bytes are its own while it runs
    assert told == [
        "waiting for 50.0 MiB of host memory: this wafer worker's other jobs hold 70.0 MiB "
        "of the 100.0 MiB it has for jobs"
    ]
    memory.release("big")
    thread.join(10)
    assert done.is_set() and memory.held == 50 * MiB


def test_a_run_waits_only_so_long() -> None:
    memory = HostMemory(budget=100 * MiB)
    memory.reserve("big", 70 * MiB)
    with pytest.raises(HostOOM, match=r"waited 0 s for 50.0 MiB .* still hold 70.0 MiB"):
        memory.reserve("next", 50 * MiB, wait_s=0.2)
    assert memory.held == 70 * MiB


def test_a_run_bigger_than_the_worker_fails_at_once_naming_the_setting() -> None:
    memory = HostMemory(budget=100 * MiB)
    began = time.monotonic()
    with pytest.raises(HostOOM, match="SAM_WAFER_WORKER_MEMORY_BYTES") as caught:
        memory.reserve("huge", 200 * MiB)
    assert caught.value.kind == "host_oom" and time.monotonic() - began < 1


def test_without_a_bound_nothing_waits() -> None:
    memory = HostMemory()
    memory.reserve("a", 10 * GiB)
    memory.reserve("b", 10 * GiB, wait_s=0)
    assert memory.held == 20 * GiB


def test_the_jobs_share_leaves_the_worker_its_own_footprint() -> None:
    assert jobs_share(20 * GiB) == 18 * GiB
    assert jobs_share(3 * GiB) == 3 * GiB // 2  # a small limit: half for the jobs


def test_the_wafer_worker_s_metrics_show_what_its_jobs_reserve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sam_server.config import get_settings
    from sam_worker.wafer_host import WaferHost, _WaferGauges

    for name in [k for k in os.environ if k.startswith("SAM_")]:
        monkeypatch.delenv(name)
    get_settings.cache_clear()
    try:
        host = WaferHost("wse-0", get_settings())  # the default cluster's
        host.memory.reserve("job/run", 123 * MiB)
        gauges = {f.name: f.samples[0].value for f in _WaferGauges(host).collect()}
        assert gauges["sam_wafer_host_memory_reserved_bytes"] == 123 * MiB
    finally:
        get_settings.cache_clear()
