"""RFC 9457 problem+json for every error, rendered in one place."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sam_server.errors import SamError

PROBLEM_BASE = "https://sam.dev/problems/"
PROBLEM_TYPE = "application/problem+json"


def problem(status: int, title: str, detail: str, slug: str, **extra: Any) -> JSONResponse:
    """A problem+json response."""
    body: dict[str, object] = {"type": PROBLEM_BASE + slug, "title": title, "status": status}
    body["detail"] = detail
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE)


def _field(loc: tuple[object, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""

    @app.exception_handler(SamError)
    async def _sam(_: Request, exc: SamError) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, exc.type_slug, errors=exc.errors)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": _field(tuple(e["loc"])), "message": e["msg"]} for e in exc.errors()]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem(422, "Invalid request", detail, "invalid-request", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
        return problem(exc.status_code, title, str(exc.detail), f"http-{exc.status_code}")

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        return problem(
            500,
            "Internal error",
            f"{type(exc).__name__}: the server failed; the error is in its log",
            "internal",
        )
