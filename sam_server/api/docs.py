"""`/docs` (Swagger UI) and `/redoc` that work with no internet access.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on a cluster without internet
access they stay blank. Here the pages point at copies served by this process: the
`fastapi-offline` package (a dependency, so `pip` brings and updates them) ships the Swagger UI
and ReDoc distribution files, and they are mounted read-only under `/docs-assets/`. Nothing on
these pages is fetched from another host: Swagger UI's online spec validator is turned off and
ReDoc's Google fonts are not linked.

"Try it out" needs a token: the OpenAPI document declares the bearer scheme on every `/api/`
operation (docs/contract.md: every call but /healthz, /readyz and /metrics takes the token), so the page's
"Authorize" button takes a SAM token and sends `Authorization: Bearer <token>`. It is added to the
generated document rather than declared route by route because several routes read the header
themselves (a submit in its worker thread, the live streams before they open).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
SCHEME = "SAMToken"
BEARER = {
    "type": "http",
    "scheme": "bearer",
    "description": "A SAM API token (`sam admin user create` or `sam token rotate` prints one), "
    "sent as `Authorization: Bearer <token>`.",
}

# Swagger UI's options (https://swagger.io/docs/open-source-tools/swagger-ui/usage/configuration/).
SWAGGER_UI_PARAMETERS = {
    "validatorUrl": None,  # the default asks validator.swagger.io about the document
    "persistAuthorization": False,  # a token typed into "Authorize" is not written to disk
    "displayRequestDuration": True,
}


def assets_dir() -> Path:
    """The folder of Swagger UI's and ReDoc's files inside the installed `fastapi_offline`."""
    folder = Path(str(files("fastapi_offline") / "static"))
    if not (folder / "swagger-ui-bundle.js").is_file():  # a broken or changed install
        raise RuntimeError(
            f"Swagger UI's files are missing from {folder}; reinstall SAM's dependencies "
            "(pip install fastapi-offline)"
        )
    return folder


def with_bearer_scheme(generate: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """Wrap FastAPI's `app.openapi`: the document it makes (and caches), with the bearer scheme
    in `components` and required by every operation under `/api/`."""

    def openapi() -> dict[str, object]:
        document = generate()
        schemes = document.setdefault("components", {}).setdefault("securitySchemes", {})
        if SCHEME not in schemes:  # once: FastAPI caches the document it returned
            schemes[SCHEME] = BEARER
            for path, operations in document.get("paths", {}).items():
                if path.startswith("/api/"):
                    for operation in operations.values():
                        operation.setdefault("security", [{SCHEME: []}])
        return document

    return openapi


def install(app: FastAPI) -> None:
    """Serve `/docs`, `/redoc` and their assets from this process (the app is made with
    `docs_url=None, redoc_url=None`), over an OpenAPI document with the bearer scheme."""
    app.openapi = with_bearer_scheme(app.openapi)  # type: ignore[method-assign]
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    def urls(request: Request, **assets: str) -> dict[str, Any]:
        """The OpenAPI document's URL and each asset's, under the proxy's root path."""
        root = request.scope.get("root_path", "")
        found = {name: f"{root}{ASSETS_URL}/{file}" for name, file in assets.items()}
        return {"openapi_url": f"{root}{openapi_url}", **found}

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            title=f"{app.title} API",
            oauth2_redirect_url=None,  # SAM's tokens are bearer tokens, not an OAuth2 flow
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
            **urls(
                request,
                swagger_js_url="swagger-ui-bundle.js",
                swagger_css_url="swagger-ui.css",
                swagger_favicon_url="favicon.png",
            ),
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            title=f"{app.title} API reference",
            with_google_fonts=False,
            **urls(request, redoc_js_url="redoc.standalone.js", redoc_favicon_url="favicon.png"),
        )
