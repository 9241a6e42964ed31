"""The host loader really prefetches in a thread, and its timeline charges the wafer's wait."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sam_worker.job_outputs import EpochTracker, shown
from sam_worker.prefetch import InputTimeline, PrefetchLoader


def _slow_source(n: int, delay: float) -> Iterator[int]:
    for i in range(n):
        time.sleep(delay)
        yield i


def _consume(loader: PrefetchLoader, work_s: float) -> tuple[list[int], float]:
    started = time.perf_counter()
    got = []
    for item in loader:
        got.append(item)
        time.sleep(work_s)  # the wafer's step
    return got, time.perf_counter() - started


def test_a_parallel_loader_overlaps_loading_with_the_steps() -> None:
    serial, serial_s = _consume(
        PrefetchLoader(_slow_source(8, 0.05), depth=2, parallel=False), 0.05
    )
    loader = PrefetchLoader(_slow_source(8, 0.05), depth=2, parallel=True)
    overlapped, overlapped_s = _consume(loader, 0.05)
    assert serial == overlapped == list(range(8))  # same batches, same order
    assert serial_s > 0.75 and overlapped_s < 0.65  # 16 x 50 ms serial, ~9 x 50 ms overlapped
    assert loader.last_load_s >= 0.04


def test_an_error_in_the_source_reaches_the_consumer_in_order() -> None:
    def broken() -> Iterator[int]:
        yield 1
        raise RuntimeError("make_batch failed at step 1")

    loader = PrefetchLoader(broken(), depth=3, parallel=True)
    assert next(loader) == 1
    with pytest.raises(RuntimeError, match="step 1"):
        next(loader)
    loader.close()


def test_close_stops_a_loader_blocked_on_a_full_queue() -> None:
    loader = PrefetchLoader(_slow_source(1000, 0.0), depth=2, parallel=True)
    next(loader)
    loader.close()
    assert loader._thread is not None and not loader._thread.is_alive()


def test_timeline_waits_only_when_data_is_slower_than_the_wafer() -> None:
    fast = InputTimeline(depth=2, parallel=True)
    waits = [fast.step(load_s=0.001, step_s=0.01) for _ in range(50)]
    assert waits[0] == pytest.approx(0.001) and sum(waits[1:]) == pytest.approx(0.0)
    assert fast.summary()["bound"] == "compute-bound"
    slow = InputTimeline(depth=4, parallel=True)
    for _ in range(100):
        slow.step(load_s=0.03, step_s=0.01)
    summary = slow.summary()  # the wafer waits 2/3 of the time, whatever the depth
    assert summary["bound"] == "input-bound"
    assert summary["input_wait_fraction"] == pytest.approx(2 / 3, abs=0.01)


def test_without_a_parallel_loader_every_load_is_waited_for() -> None:
    serial = InputTimeline(depth=4, parallel=False)
    waits = [serial.step(load_s=0.002, step_s=0.01) for _ in range(10)]
    assert waits == pytest.approx([0.002] * 10)


def test_epoch_summaries_and_log_levels() -> None:
    tracker = EpochTracker(steps_per_epoch=2, num_epochs=2)
    assert tracker.add(0, 1.0, 0.5) is None
    assert tracker.add(1, 3.0, 1.0) == "epoch 1/2: mean loss 2, accuracy 75.00% over steps 0-1"
    resumed = EpochTracker(steps_per_epoch=4, num_epochs=1)
    resumed.add(2, 1.0, None)
    line = resumed.add(3, 1.0, None)
    assert line is not None and "accuracy" not in line and "this attempt" in line
    assert shown("WARNING", "INFO") and not shown("DEBUG", "INFO") and not shown("INFO", "WARNING")
