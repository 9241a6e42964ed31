"""Operations endpoints: /healthz, /readyz (no auth), /metrics (the series that name tenants
only with the scrape token: sam_server/services/scrape.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from sam_server.api.deps import principal_from_header
from sam_server.errors import Forbidden
from sam_server.services.health import database_ready
from sam_server.services.scrape import REFUSED, bearer, exposition, is_scrape_token

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> Response:
    """The database and the broker are reachable."""
    checks: dict[str, str] = {}
    try:
        with request.app.state.sessions() as session:
            database_ready(session)
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    checks["broker"] = request.app.state.broker_check()
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus text exposition: without a token the cluster-wide series only; with
    SAM_METRICS_TOKEN (or the cluster admin's token) also those that name tenants; 401 for a
    token that is neither, 403 for another user's."""
    header = request.headers.get("authorization")
    token = bearer(header)
    if token is not None and not is_scrape_token(
        token, request.app.state.settings.metrics.metrics_token
    ):
        with request.app.state.sessions() as session:
            principal = principal_from_header(session, header)  # 401 for an unknown token
        if not principal.is_admin:
            raise Forbidden(REFUSED)
    body = exposition(request.app.state.registry, tenants=token is not None)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
