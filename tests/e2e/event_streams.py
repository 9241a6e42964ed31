"""Many concurrent `/api/v1/events` streams (what open dashboard pages hold) on one asyncio
thread, and the list-latency probe the scale test and benchmarks/events.py measure with."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import httpx


class EventStreams:
    """`n` open `GET /api/v1/events` streams; counts connections, events and heartbeats."""

    def __init__(self, url: str, headers: dict[str, str], n: int) -> None:
        self.url, self.headers, self.n = url, headers, n
        self.connected = 0  # streams whose first event (the cluster view) arrived
        self.events: dict[str, int] = {}  # event name -> how many, over all streams
        self.ended = 0
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _one(self, client: httpx.AsyncClient) -> None:
        headers = self.headers | {"Accept": "text/event-stream"}
        first = True
        async with client.stream("GET", "/api/v1/events", headers=headers) as response:
            assert response.status_code == 200, response.status_code
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                    self.events[name] = self.events.get(name, 0) + 1
                    if first:
                        first = False
                        self.connected += 1
                    if name in ("end", "shutdown"):
                        break
        self.ended += 1

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        limits = httpx.Limits(max_connections=self.n + 10)
        timeout = httpx.Timeout(60, read=None)
        async with httpx.AsyncClient(base_url=self.url, limits=limits, timeout=timeout) as client:
            tasks = []
            for i in range(self.n):
                tasks.append(asyncio.create_task(self._one(client)))
                if i % 50 == 49:
                    await asyncio.sleep(0.05)  # no connect storm
            await self._stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def start(self, timeout_s: float = 120) -> EventStreams:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while self.connected < self.n and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.connected == self.n, f"only {self.connected} of {self.n} streams opened"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


def list_latencies(
    url: str, headers: dict[str, str], rounds: int, cap_s: float = 120.0
) -> list[float]:
    """Seconds of `rounds` sequential `GET /api/v1/jobs` calls; a call that has not answered
    within `cap_s` counts as `cap_s` (the server before the event hub could starve it)."""
    samples = []
    with httpx.Client(base_url=url, headers=headers, timeout=cap_s) as client:
        for _ in range(rounds):
            began = time.perf_counter()
            try:
                assert client.get("/api/v1/jobs").status_code == 200
            except httpx.TimeoutException:
                samples.append(cap_s)
                continue
            samples.append(time.perf_counter() - began)
    return samples


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
