"""The cluster as the database records it, for Prometheus: read at scrape time by the API's
`/metrics`, so a deployment has its occupancy, waits, compiles and training progress on a
dashboard even where the scheduler's and the workers' own metrics ports are off (`sam up`).

Every value is a gauge or a counter the database already keeps; nothing is counted in this
process, so any number of server processes answer the same. The aggregate queries are grouped
by wafer, tenant or compile server, never by job, so the label sets stay small.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sam_server.db.models import CompileServer, Job, Tenant, Wafer
from sam_server.db.types import as_utc, utcnow
from sam_server.services.observe import wafer_online
from sam_server.states import WAITING


class ClusterCollector:
    """`sam_cluster_*` and `sam_queue_*` metrics from one short read of the database."""

    def __init__(self, sessions: sessionmaker[Session], *, stale_s: float = 15.0) -> None:
        self.sessions = sessions
        self.stale_s = stale_s

    def collect(self) -> Iterator[Metric]:
        """Prometheus' collector protocol: the metric families, read now."""
        with self.sessions() as session:
            yield from _wafers(session, self.stale_s)
            yield _allocated(session)
            yield _oldest_wait(session, utcnow())
            yield _steps(session)
            yield from _compile_servers(session, self.stale_s)


def _wafers(session: Session, stale_s: float) -> Iterator[Metric]:
    pes = GaugeMetricFamily("sam_cluster_wafer_pes", "PEs of each wafer", labels=["wafer", "arch"])
    up = GaugeMetricFamily(
        "sam_cluster_wafer_online", "1 while the wafer's worker heartbeats", labels=["wafer"]
    )
    for wafer in session.execute(select(Wafer).order_by(Wafer.id)).scalars():
        pes.add_metric([wafer.id, wafer.arch], wafer.rows * wafer.cols)
        up.add_metric([wafer.id], 1.0 if wafer_online(wafer, stale_s=stale_s) else 0.0)
    yield pes
    yield up


def _allocated(session: Session) -> Metric:
    gauge = GaugeMetricFamily(
        "sam_cluster_allocated_pes",
        "PEs held by jobs' regions, by wafer and tenant",
        labels=["wafer", "tenant"],
    )
    query = (
        select(Job.wafer_id, Tenant.name, func.sum(Job.region_rows * Job.region_cols))
        .join(Tenant, Tenant.id == Job.tenant_id)
        .where(Job.wafer_id.is_not(None))
        .group_by(Job.wafer_id, Tenant.name)
    )
    for wafer, tenant, pes in session.execute(query):
        gauge.add_metric([str(wafer), tenant], float(pes or 0))
    return gauge


def _oldest_wait(session: Session, now: datetime) -> Metric:
    gauge = GaugeMetricFamily(
        "sam_queue_oldest_wait_seconds",
        "How long the tenant's longest-waiting job (queued, compiling or pending) has waited",
        labels=["tenant"],
    )
    since = func.min(func.coalesce(Job.eligible_at, Job.created_at))
    query = (
        select(Tenant.name, since)
        .join(Tenant, Tenant.id == Job.tenant_id)
        .where(Job.state.in_(WAITING))
        .group_by(Tenant.name)
    )
    for tenant, first in session.execute(query):
        began = as_utc(first)
        gauge.add_metric([tenant], max(0.0, (now - began).total_seconds()) if began else 0.0)
    return gauge


def _steps(session: Session) -> Metric:
    # A gauge, not a counter: a job resumed from a checkpoint steps back a little, which a
    # counter would read as a reset. Graph its rate with deriv().
    gauge = GaugeMetricFamily(
        "sam_cluster_training_steps",
        "Training steps the tenant's jobs have completed, all jobs ever",
        labels=["tenant"],
    )
    query = (
        select(Tenant.name, func.coalesce(func.sum(Job.progress_step), 0))
        .join(Tenant, Tenant.id == Job.tenant_id)
        .group_by(Tenant.name)
    )
    for tenant, steps in session.execute(query):
        gauge.add_metric([tenant], float(steps))
    return gauge


def _compile_servers(session: Session, stale_s: float) -> Iterator[Metric]:
    compiles = CounterMetricFamily(
        "sam_cluster_compiles",
        "Compiles a compile server has finished (its heartbeat's count)",
        labels=["server"],
    )
    hits = CounterMetricFamily(
        "sam_cluster_compile_cache_hits",
        "Compiles a compile server answered from its cache",
        labels=["server"],
    )
    busy = GaugeMetricFamily(
        "sam_cluster_compiles_busy",
        "Compiles a live compile server is running now",
        labels=["server"],
    )
    now = utcnow()
    for server in session.execute(select(CompileServer).order_by(CompileServer.id)).scalars():
        compiles.add_metric([server.id], server.compiles)
        hits.add_metric([server.id], server.cache_hits)
        beat = as_utc(server.heartbeat_at)
        live = beat is not None and (now - beat).total_seconds() < stale_s
        busy.add_metric([server.id], server.busy if live else 0)
    yield compiles
    yield hits
    yield busy
