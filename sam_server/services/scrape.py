"""Who sees the Prometheus series that name tenants (issue 29).

A series labelled `tenant` tells whoever reads it which tenants exist, how many PEs each holds
and how far its training went, while `GET /tenants/<other>` is a 404 to another tenant. So every
SAM `/metrics` (the API's and the scheduler's port) answers:

- no `Authorization` header: the cluster-wide series only, every family that names a tenant
  left out (health checks and casual `curl`s keep working, and learn nothing of tenants);
- `Authorization: Bearer <SAM_METRICS_TOKEN>` (or the cluster admin's token on the API):
  every series; Prometheus sends it with `authorization: {credentials_file: ...}`
  (deploy/prometheus/prometheus.yml, docs/operator-guide.md);
- any other bearer token: 401 (a misconfigured Prometheus sees its target down, `up == 0`,
  rather than silently losing the tenant series).
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

log = logging.getLogger("sam.metrics")

TENANT_LABEL = "tenant"
# What a refused scrape is told, and how to fix it.
REFUSED = (
    "this token may not read the per-tenant series: send the scrape token "
    "(Authorization: Bearer <SAM_METRICS_TOKEN>), or no Authorization header for the "
    "cluster-wide series only"
)


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None without a header."""
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def is_scrape_token(token: str, expected: str | None) -> bool:
    """Whether `token` is the configured scrape token (compared in constant time)."""
    return bool(expected) and hmac.compare_digest(token.encode(), str(expected).encode())


class WithoutTenants(Collector):
    """A view of `registry` without the metric families whose series name a tenant."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        for family in self.registry.collect():
            samples: list[Sample] = family.samples
            if not any(TENANT_LABEL in sample.labels for sample in samples):
                yield family


def exposition(registry: CollectorRegistry, *, tenants: bool) -> bytes:
    """The Prometheus text of `registry`, with or without the series that name tenants."""
    if tenants:
        return generate_latest(registry)
    public = CollectorRegistry(auto_describe=False)
    public.register(WithoutTenants(registry))
    return generate_latest(public)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


def serve(registry: CollectorRegistry, port: int, host: str, token: str | None) -> None:
    """Serve `registry` on http://host:port/metrics in a daemon thread, the series that name
    tenants only to a scrape with `token` (the scheduler's port: prometheus_client's own
    server has no bearer check)."""

    def app(environ: dict[str, Any], start: Callable[..., object]) -> Iterable[bytes]:
        given = bearer(environ.get("HTTP_AUTHORIZATION"))
        if given is not None and not is_scrape_token(given, token):
            start(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")],
            )
            return [REFUSED.encode() + b"\n"]
        body = exposition(registry, tenants=given is not None)
        start("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return [body]

    server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
