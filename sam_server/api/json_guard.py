"""Strict JSON and URLs: odd input is a 422 naming the field, before any route sees it.

Python's `json` (which FastAPI uses) accepts `Infinity`, `NaN` and `1e999` (read as infinity),
and a body nested 100,000 deep exhausts the stack; PostgreSQL refuses text with a NUL character
with a DataError. Each was a 500 further in. `JsonGuard` parses a JSON body once strictly,
walks it with `check_tree` (finite numbers, no NUL, at most `MAX_DEPTH` deep) and hands the
unchanged bytes on; a NUL in the URL's path or query is refused the same way.
"""

from __future__ import annotations

import json
import math
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sam_server.schemas.numbers import MAX_DEPTH, TreeError, check_tree

_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class _NonFinite(float):
    """A number that parsed to infinity or NaN; kept as a marker until the walk names its field."""


def _constant(name: str) -> float:
    return _NonFinite(math.nan if name == "NaN" else math.inf)


def _float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(value)


def strict_json(body: bytes) -> object:
    """The parsed body, or `TreeError` naming where it breaks SAM's rules. Malformed JSON
    raises `json.JSONDecodeError` (the framework's own 422 describes it)."""
    try:
        value = json.loads(body, parse_constant=_constant, parse_float=_float)
    except RecursionError:
        raise TreeError("body", f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise TreeError("body", str(exc)) from None
    check_tree(value)
    return value


class JsonGuard:
    """ASGI middleware: refuse a request whose JSON body or URL breaks `check_tree`'s rules with
    a problem+json 422 that names the field (`errors: [{field, message}]`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _url_problem(scope)
        if problem is not None:
            await _reject(send, problem)
            return
        if scope["method"] not in _BODY_METHODS or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay(b"", receive, message), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body.strip():
            try:
                strict_json(body)
            except TreeError as exc:
                await _reject(send, exc)
                return
            except json.JSONDecodeError:
                pass  # malformed: the route's own validation says where
        await self.app(scope, _replay(body, receive), send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # FastAPI reads a body without a content type as JSON


def _url_problem(scope: Scope) -> TreeError | None:
    if "\x00" in scope.get("path", ""):
        return TreeError("path", "the URL contains a NUL character (%00)")
    query = scope.get("query_string") or b""
    if b"%00" in query or b"\x00" in query:
        for pair in query.split(b"&"):
            name, _, value = pair.partition(b"=")
            if b"\x00" in unquote_to_bytes(value) or b"\x00" in unquote_to_bytes(name):
                field = unquote_to_bytes(name).decode("utf-8", "replace").replace("\x00", "")
                return TreeError(f"query.{field}", "contains a NUL character (%00)")
    return None


def _replay(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """A `receive` that hands the buffered body over once, then waits on the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first or {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _reject(send: Send, exc: TreeError) -> None:
    field = exc.field
    detail = f"{field}: {exc.message}"
    body = json.dumps(
        {
            "type": "https://sam.dev/problems/invalid-request",
            "title": "Invalid request",
            "status": 422,
            "detail": detail,
            "errors": [{"field": field, "message": exc.message}],
        }
    ).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 422, "headers": headers})
    await send({"type": "http.response.body", "body": body})
