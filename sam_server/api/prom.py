"""The API's Prometheus metrics, correct under several server processes.

`sam server --workers N` points PROMETHEUS_MULTIPROC_DIR at a fresh folder before the worker
processes start: every process then keeps its counters in files there and any process's
`/metrics` sums them all (prometheus_client's multiprocess mode), so successive scrapes of a
counter never go backwards whichever process answers. A single process keeps them in memory.
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The shared metrics folder when this process is one of several, else None."""
    return os.environ.get(MULTIPROC_ENV) or None


class ApiMetrics:
    """The metric objects of one app and the registry its `/metrics` renders."""

    def __init__(self, *collectors: Any) -> None:
        shared = multiprocess_dir() is not None
        # In multiprocess mode the values live in the shared folder, not in a registry: the
        # objects stay unregistered and the scrape registry reads every process's files.
        own = None if shared else CollectorRegistry()
        self.submits = Counter("sam_submits", "Jobs submitted", registry=own)
        self.requests = Histogram(
            "sam_api_request_duration_seconds",
            "API request duration by route template, method and status",
            ["route", "method", "status"],
            registry=own,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.followers = Gauge(
            "sam_log_followers",
            "Live log streams open (summed over server processes)",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.event_followers = Gauge(
            "sam_event_followers",
            "Live /api/v1/events streams open (summed over server processes)",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.event_polls = Counter(
            "sam_event_polls",
            "Database polls made for the /api/v1/events streams (one per tick per process)",
            registry=own,
        )
        self.registry = own if own is not None else CollectorRegistry()
        if shared:
            multiprocess.MultiProcessCollector(self.registry)
        for collector in collectors:  # read at scrape time (e.g. from the database)
            self.registry.register(collector)

    def process_exited(self) -> None:
        """Drop this process's live gauges from the shared folder."""
        if multiprocess_dir() is not None:
            multiprocess.mark_process_dead(os.getpid())


class RequestTimer:
    """ASGI middleware: observe every HTTP request's duration by route template and status."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began, status = time.perf_counter(), 500

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            route = scope.get("route")
            # The template (/api/v1/jobs/{job_id}), never the raw path: ids would explode
            # the label set.
            name = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(name, scope.get("method", ""), str(status)).observe(
                time.perf_counter() - began
            )
