"""The FastAPI application: routes, problem+json errors, body cap, start-up bootstrap."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from sam_server import __version__, dashboard
from sam_server.api import (
    accounting,
    control,
    docs,
    jobs,
    live,
    ops,
    problems,
    results,
    tenants,
    tokens,
    uploads,
)
from sam_server.api.json_guard import JsonGuard
from sam_server.api.limits import BodyLimit, SubmitBuckets
from sam_server.api.livehub import EventHub, MetricsHub
from sam_server.api.prom import ApiMetrics, RequestTimer
from sam_server.api.stream import LogHub, install_drain_on_signal
from sam_server.broker import broker_check_for
from sam_server.config import Settings, get_settings
from sam_server.db.models import Job
from sam_server.db.session import engine_for
from sam_server.services.bootstrap import prepare_database
from sam_server.services.cluster_metrics import ClusterCollector

log = logging.getLogger("sam.server")
# the request cap of an upload's manifest (thousands of paths and chunk hashes)
MANIFEST_BODY_BYTES = 64 << 20


class _JobGauges:
    """Jobs by state and tenant, read from the database at scrape time."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("sam_jobs", "Jobs by state", labels=["state"])
        with self.sessions() as session:
            for state, n in session.execute(select(Job.state, func.count()).group_by(Job.state)):
                gauge.add_metric([state], n)
        yield gauge


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Log followers end with a `shutdown` event as soon as SIGTERM arrives, so the server's
    # graceful shutdown (which waits for open responses) is not held up by live streams.
    install_drain_on_signal(app.state.log_hub, app.state.event_hub, app.state.metrics_hub)
    yield
    await app.state.log_hub.close()
    await app.state.event_hub.close()
    await app.state.metrics_hub.close()
    app.state.prom.process_exited()


def create_app(settings: Settings | None = None) -> FastAPI:
    """The SAM control plane; prepares the database (SQLite: creates/upgrades it) at creation."""
    settings = settings or get_settings()
    url = settings.resolved_database_url
    prepare_database(settings)
    app = FastAPI(
        lifespan=_lifespan,
        title="SAM",
        version=__version__,
        description="Scheduler and Allocation Manager for wafer-scale machines",
        docs_url=None,  # /docs and /redoc are served offline by api/docs.py
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.sessions = sessionmaker(engine_for(url), expire_on_commit=False)
    app.state.broker_check = broker_check_for(settings)
    app.state.submit_buckets = SubmitBuckets(settings.api.submit_rate_per_s)
    app.state.submit_limiter = None  # an anyio CapacityLimiter, made in the event loop
    app.state.log_hub = LogHub(
        app.state.sessions,
        poll_s=settings.api.follow_poll_s,
        heartbeat_s=settings.api.follow_heartbeat_s,
    )
    app.state.event_hub = EventHub(
        app.state.sessions,
        poll_s=settings.api.follow_poll_s,
        heartbeat_s=settings.api.follow_heartbeat_s,
        stale_s=settings.worker.heartbeat_s * 3,
    )
    app.state.metrics_hub = MetricsHub(
        app.state.sessions,
        poll_s=settings.api.follow_poll_s,
        heartbeat_s=settings.api.follow_heartbeat_s,
    )
    prom = ApiMetrics(_JobGauges(app.state.sessions), ClusterCollector(app.state.sessions))
    app.state.prom, app.state.registry = prom, prom.registry
    app.state.submits_total = prom.submits
    app.state.log_hub.gauge = prom.followers
    app.state.event_hub.gauge = prom.event_followers
    app.state.event_hub.poll_counter = prom.event_polls
    problems.install(app)
    app.include_router(ops.router)
    app.include_router(tenants.router)
    app.include_router(jobs.router)
    app.include_router(control.router)
    app.include_router(tokens.router)
    app.include_router(results.router)
    app.include_router(accounting.router)
    app.include_router(live.router)
    app.include_router(uploads.router)
    docs.install(app)
    dashboard.install(app)
    app.add_middleware(JsonGuard)  # inside BodyLimit: the size cap applies first
    manifests = max(settings.api.max_body_bytes, MANIFEST_BODY_BYTES)
    larger = {
        "/api/v1/uploads/chunks/": settings.storage.upload_chunk_bytes,
        "/api/v1/uploads/missing": manifests,
        "/api/v1/projects": manifests,
        "/api/v1/datasets/": manifests,
    }
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_body_bytes, larger=larger)
    app.add_middleware(RequestTimer, metrics=prom)
    return app
