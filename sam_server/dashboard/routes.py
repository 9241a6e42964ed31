"""Routes of the dashboard: the page at `/` and its static files under `/dashboard/static/`.

The page carries no data and needs no token: the script signs in with a SAM token kept in the
browser session and calls the same API as any other client. A Content-Security-Policy limits
the page to this origin, so nothing it loads or calls can reach another host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from sam_server import __version__

STATIC = Path(__file__).resolve().parent / "static"

# Only this origin: scripts, styles, fetches and SSE; images also from blob: (report heatmaps
# are fetched with the bearer header and shown from memory).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index() -> Response:
    """The dashboard's single page (hash routes: #/queue, #/jobs/ID, #/cluster, #/tenants)."""
    html = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{version}}", __version__)
    return HTMLResponse(html, headers=HEADERS)


class _Static(StaticFiles):
    """Static files with the dashboard's headers (the CSP also covers the script's fetches)."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(HEADERS)
        return response


def install(app: FastAPI) -> None:
    """Serve the dashboard from `app`: `/` and `/dashboard/static/`."""
    app.include_router(router)
    app.mount("/dashboard/static", _Static(directory=STATIC), name="dashboard-static")
