"""A compile server's heartbeat (liveness, slots and counters for `sam cluster` and the scheduler)
and its Prometheus metrics (`sam worker compile --metrics-port`)."""

from __future__ import annotations

import logging
import threading
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from sam_server.config import get_settings
from sam_server.db.session import session_scope
from sam_server.services.lifecycle import heartbeat_compile_server
from sam_worker.identity import WORKER_ID

log = logging.getLogger("sam.worker.compile")

STATS = {"busy": 0, "compiles": 0, "cache_hits": 0, "slots": 1}
_STATS_LOCK = threading.Lock()

REGISTRY = CollectorRegistry()
SLOTS = Gauge("sam_compile_slots", "Compiles this server runs at once", registry=REGISTRY)
RUNNING = Gauge("sam_compiles_running", "Compiles running on this server now", registry=REGISTRY)
COMPILES = Counter(
    "sam_compiles",
    "Compiles finished, by outcome (succeeded, cache_hit, failed)",
    ["outcome"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "sam_compile_duration_seconds",
    "Wall time of one compile (a cache hit included)",
    registry=REGISTRY,
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
)
QUEUE_WAIT = Histogram(
    "sam_compile_queue_wait_seconds",
    "From the scheduler sending a compile to this server starting it",
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
)


def count(key: str, delta: int = 1) -> None:
    """Adjust one of this server's counters (busy, compiles, cache_hits)."""
    with _STATS_LOCK:
        STATS[key] += delta
    if key == "busy":
        RUNNING.inc(delta)


def set_slots(slots: int) -> None:
    """The number of compiles this server runs at once (its Celery threads)."""
    with _STATS_LOCK:
        STATS["slots"] = slots
    SLOTS.set(slots)


class CompileOutcome(StrEnum):
    """How a compile ended, as the `sam_compiles` counter labels it."""

    SUCCEEDED = "succeeded"
    CACHE_HIT = "cache_hit"
    FAILED = "failed"


def record(outcome: CompileOutcome, seconds: float) -> None:
    """Account one finished compile."""
    COMPILES.labels(outcome).inc()
    DURATION.observe(seconds)


def serve_metrics(port: int, host: str) -> None:
    """/metrics of this compile server on `port` (a thread of this process)."""
    start_http_server(port, addr=host, registry=REGISTRY)
    log.info("compile-server metrics on http://%s:%d/metrics", host, port)


def start_heartbeat() -> None:
    """Beat every `heartbeat_s` seconds in a daemon thread."""
    settings = get_settings()

    def loop() -> None:
        while True:
            try:
                with _STATS_LOCK:
                    stats = dict(STATS)
                with session_scope(settings.resolved_database_url) as session:
                    heartbeat_compile_server(session, server_id=WORKER_ID, **stats)
            except Exception as exc:  # noqa: BLE001
                log.warning("compile-server heartbeat failed: %s", exc)
            threading.Event().wait(settings.worker.heartbeat_s)

    threading.Thread(target=loop, name="compile-heartbeat", daemon=True).start()
