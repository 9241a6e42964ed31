"""The controller's Prometheus metrics (`sam scheduler`), served on its own port
(`SAM_SCHEDULER_METRICS_PORT`, 0 = off): cycle duration, placements, preemptions, compiles
dispatched, leases reaped, and the queue depth by tenant and reason read from the database at
scrape time, and each wafer's free PEs, largest free rectangle and fragmentation after the last
cycle."""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select
from sqlalchemy.orm import sessionmaker

from sam_server.db.models import Job, Tenant
from sam_server.services import scrape
from sam_server.states import WAITING

log = logging.getLogger("sam.scheduler")


class _QueueDepth:
    """Waiting jobs by tenant, state and the scheduler's last reason, at scrape time."""

    def __init__(self, sessions: sessionmaker) -> None:  # type: ignore[type-arg]
        self.sessions = sessions

    def collect(self):  # type: ignore[no-untyped-def]
        gauge = GaugeMetricFamily(
            "sam_scheduler_queue_depth",
            "Jobs waiting, by tenant, state and the reason the last cycle gave",
            labels=["tenant", "state", "reason"],
        )
        query = (
            select(Tenant.name, Job.state, Job.reason, func.count())
            .join(Tenant, Tenant.id == Job.tenant_id)
            .where(Job.state.in_(WAITING))
            .group_by(Tenant.name, Job.state, Job.reason)
        )
        with self.sessions() as session:
            for tenant, state, reason, n in session.execute(query):
                gauge.add_metric([tenant, state, reason or "none"], n)
        yield gauge


class SchedulerMetrics:
    """Counters and a histogram the loop feeds after each cycle."""

    def __init__(self, sessions: sessionmaker | None = None) -> None:  # type: ignore[type-arg]
        self.registry = CollectorRegistry()
        reg = self.registry
        self.cycle = Histogram(
            "sam_scheduler_cycle_duration_seconds",
            "Duration of one planning cycle (snapshot, plan, decisions)",
            registry=reg,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.placements = Counter(
            "sam_scheduler_placements", "Jobs placed on a wafer region", registry=reg
        )
        self.preemptions = Counter("sam_scheduler_preemptions", "Preemptions asked", registry=reg)
        self.compiles = Counter("sam_scheduler_compiles_dispatched", "Compiles sent", registry=reg)
        self.reaped = Counter(
            "sam_scheduler_leases_reaped", "Expired leases requeued", registry=reg
        )
        self.free_pes = Gauge(
            "sam_scheduler_wafer_free_pes",
            "Free PEs of a wafer after the last cycle",
            ["wafer"],
            registry=reg,
        )
        self.largest_free = Gauge(
            "sam_scheduler_wafer_largest_free_rect_pes",
            "PEs of a wafer's largest free rectangle after the last cycle",
            ["wafer"],
            registry=reg,
        )
        self.fragmentation = Gauge(
            "sam_scheduler_wafer_fragmentation_ratio",
            "1 - largest free rectangle / free PEs of a wafer after the last cycle",
            ["wafer"],
            registry=reg,
        )
        if sessions is not None:
            reg.register(_QueueDepth(sessions))

    def observe(self, stats: Any) -> None:
        """Account one cycle's CycleStats."""
        self.cycle.observe(stats.seconds)
        self.placements.inc(stats.starts)
        self.preemptions.inc(stats.preemptions)
        self.compiles.inc(stats.compiles)
        self.reaped.inc(len(stats.reaped))
        for wafer, (free, largest, frag) in getattr(stats, "wafers", {}).items():
            self.free_pes.labels(wafer).set(free)
            self.largest_free.labels(wafer).set(largest)
            self.fragmentation.labels(wafer).set(frag)

    def serve(self, port: int, host: str = "127.0.0.1", token: str | None = None) -> None:
        """Expose /metrics on `port` (a thread of this process); the queue depth by tenant only
        to a scrape that sends `token` (SAM_METRICS_TOKEN)."""
        scrape.serve(self.registry, port, host, token)
        log.info("scheduler metrics on http://%s:%d/metrics", host, port)
