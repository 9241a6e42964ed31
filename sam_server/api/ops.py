"""Operations endpoints: /healthz, /readyz, /metrics (no auth)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sam_server.services.health import database_ready

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
    """Prometheus text exposition."""
    return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)
