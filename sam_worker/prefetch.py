"""The host data loader of a wafer job (`data_loading`) and its cost in simulated time.

`PrefetchLoader` really runs the batch source ahead of the wafer: with `use_parallel_loader`
a thread produces up to `prefetch_depth` batches while the wafer steps; otherwise each batch is
produced when the step needs it. It measures the host seconds each batch took to produce.

`InputTimeline` turns those seconds into simulated waiting: a step starts when the wafer is free
AND its batch is ready; the loader may work on batch k once batch k - depth has been taken (the
queue has a free slot). When data is slower than the wafer, steps wait, the wait is charged to
the step's cycles, and the report says "input-bound" with the fraction of time spent waiting and `input_slowdown` (elapsed / compute).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

_DONE = object()


class PrefetchLoader:
    """Batches of `source`, prefetched `depth` ahead in a thread when `parallel` is true.

    `last_load_s` is the host time the most recently returned batch took to produce.
    """

    def __init__(self, source: Iterator[Any], *, depth: int, parallel: bool) -> None:
        self.source = source
        self.depth = max(0, int(depth))
        self.parallel = bool(parallel) and self.depth > 0
        self.last_load_s = 0.0
        self._stop = threading.Event()
        self._queue: queue.Queue[tuple[Any, float]] = queue.Queue(maxsize=max(1, self.depth))
        self._thread: threading.Thread | None = None
        if self.parallel:
            self._thread = threading.Thread(target=self._produce, name="sam-prefetch", daemon=True)
            self._thread.start()

    def __iter__(self) -> PrefetchLoader:
        return self

    def __next__(self) -> Any:
        if not self.parallel:
            started = time.perf_counter()
            batch = next(self.source)
            self.last_load_s = time.perf_counter() - started
            return batch
        item, seconds = self._queue.get()
        if item is _DONE:
            self._queue.put((_DONE, 0.0))  # later calls end too
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        self.last_load_s = seconds
        return item

    def _produce(self) -> None:
        """The loader thread: produce batches into the bounded queue until stopped or done."""
        try:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    item: Any = next(self.source)
                except StopIteration:
                    item = _DONE
                except Exception as exc:  # noqa: BLE001 - re-raised in the consumer
                    item = exc
                if not self._put((item, time.perf_counter() - started)) or item is _DONE:
                    return
                if isinstance(item, BaseException):
                    return
        finally:
            _close(self.source)

    def _put(self, entry: tuple[Any, float]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """Stop the loader thread (the source is closed by it) or close the source."""
        self._stop.set()
        if self._thread is None:
            _close(self.source)
            return
        while True:  # free the queue so a blocked put sees the stop
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)


def _close(source: object) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        try:
            close()
        except ValueError:  # a generator still running in a stuck thread; it ends with it
            pass


class InputTimeline:
    """Simulated seconds the wafer waits for input, step by step (see the module docstring)."""

    def __init__(self, *, depth: int, parallel: bool) -> None:
        self.depth = max(0, int(depth)) if parallel else 0
        self.loader_free = 0.0
        self.wafer_free = 0.0
        self.taken_at: list[float] = []
        self.wait_s = 0.0
        self.compute_s = 0.0
        self.load_s = 0.0

    def step(self, load_s: float, step_s: float) -> float:
        """Account one step whose batch took `load_s` host seconds and whose wafer work takes
        `step_s` simulated seconds; returns the seconds the step waited for its batch."""
        k = len(self.taken_at)
        if self.depth == 0:  # produced only when the step asks for it
            ready = self.wafer_free + load_s
        else:
            slot_free = self.taken_at[k - self.depth] if k >= self.depth else 0.0
            ready = max(self.loader_free, slot_free) + load_s
            self.loader_free = ready
        start = max(self.wafer_free, ready)
        wait = start - self.wafer_free
        self.taken_at.append(start)
        self.wafer_free = start + step_s
        self.wait_s += wait
        self.compute_s += step_s
        self.load_s += load_s
        return wait

    def summary(self) -> dict[str, Any]:
        """The report's `input` section: the bound, the waiting fraction, the loader's times."""
        total = self.wait_s + self.compute_s
        fraction = self.wait_s / total if total > 0 else 0.0
        steps = max(1, len(self.taken_at))
        return {
            "bound": "input-bound" if fraction >= 0.5 else "compute-bound",
            "input_wait_fraction": round(fraction, 4),
            # how much longer the run took than the wafer alone (1.0: never waited for data)
            "input_slowdown": round(total / self.compute_s, 4) if self.compute_s > 0 else 1.0,
            "input_wait_s": self.wait_s,
            "compute_s": self.compute_s,
            "mean_batch_load_s": self.load_s / steps,
            "prefetch_depth": self.depth,
            "steps": len(self.taken_at),
        }
