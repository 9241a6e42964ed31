"""Issue 29: a worker process that grew (a compile worker stayed at 1.32 GB after a compile_oom)
is recycled between tasks, and a wafer worker's own memory is bounded. Real `sam worker compile`
processes on the embedded broker and a SQLite database."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sam_server.broker import COMPILE_QUEUE, COMPILE_TASK, celery_sender
from sam_server.config import Settings
from sam_server.db.session import upgrade_database
from sam_worker.recycle import wafer_worker_memory_bytes
from sam_worker.supervisor import _SAM

pytestmark = pytest.mark.slow
MiB = 1 << 20


def _start_worker(tmp_path: Path, recycle_bytes: int) -> tuple[subprocess.Popen[bytes], Path]:
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_dir.mkdir()
    upgrade_database(settings.resolved_database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env.update(
        SAM_DATA_DIR=str(settings.data_dir),
        SAM_WORKER_RECYCLE_RSS_BYTES=str(recycle_bytes),
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*_SAM, "worker", "compile", "--concurrency", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _wait_for(log, "ready", proc)
    return proc, log


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], count: int = 1) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if log.read_text(errors="replace").count(text) >= count:
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{text!r} x{count} not in the worker's log:\n{log.read_text()[-3000:]}")


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _send(tmp_path: Path, job_id: str) -> None:
    send = celery_sender(Settings(data_dir=tmp_path / "data"))
    send(COMPILE_TASK, COMPILE_QUEUE, {"job_id": job_id})


def test_a_worker_above_the_rss_bound_finishes_its_task_then_exits_to_be_restarted(
    tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    # Any compile worker holds more than 64 MiB (torch is imported), so the first task's end
    # finds it "grown", as a worker left at 1.32 GB by a compile_oom would be under 2 GiB.
    proc, log = _start_worker(tmp_path, 64 * MiB)
    workers.append(proc)
    _send(tmp_path, "no-such-job")
    assert proc.wait(120) == 0  # a warm shutdown: `sam up` and compose start a fresh one
    text = log.read_text()
    assert "succeeded" in text and "'skipped'" in text  # the task ran to its end first
    assert "recycling it" in text


def test_a_worker_under_the_bound_keeps_taking_tasks(
    tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    proc, log = _start_worker(tmp_path, 64 * 1024 * MiB)
    workers.append(proc)
    for job_id in ("first", "second"):
        _send(tmp_path, job_id)
    _wait_for(log, "'skipped'", proc, count=2)
    assert proc.poll() is None and "recycling" not in log.read_text()


def test_the_wafer_worker_limit_is_the_setting_or_its_slots_bound() -> None:
    assert wafer_worker_memory_bytes(3 << 30, 16, 4 << 30) == 3 << 30
    auto = wafer_worker_memory_bytes(0, 2, 1 << 30)
    assert auto == min(4 << 30, int(0.9 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
    huge = wafer_worker_memory_bytes(0, 256, 1 << 40)
    assert huge < os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_past_the_data_limit_an_allocation_fails_with_memory_error_not_the_process() -> None:
    """What a wafer worker's RLIMIT_DATA does to a step that outgrows its plan: MemoryError
    (the job's `host_oom`), and the process goes on (run in a child, the limit is per process)."""
    code = (
        "from sam_worker.recycle import limit_data\n"
        "limit_data(512 * 2**20)\n"
        "try:\n"
        "    bytearray(1024 * 2**20)\n"
        "except MemoryError:\n"
        "    print('host_oom')\n"
        "print('still here', len(bytearray(16 * 2**20)))\n"
    )
    out = subprocess.run(
        [*_SAM[:1], "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split("\n")[:2] == ["host_oom", f"still here {16 * MiB}"]
