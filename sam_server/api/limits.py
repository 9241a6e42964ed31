"""Request-body cap (413 before the body is parsed) and a per-tenant submit token bucket."""

from __future__ import annotations

import json
import threading
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sam_server.errors import RateLimited


class BodyLimit:
    """ASGI middleware: refuse bodies over `max_bytes` with a problem+json 413."""

    def __init__(self, app: ASGIApp, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # path prefix -> its own cap (uploads: a chunk, a manifest of thousands of files)
        self.larger = sorted((larger or {}).items(), key=lambda kv: -len(kv[0]))

    def _cap(self, path: str) -> int:
        for prefix, cap in self.larger:
            if path.startswith(prefix):
                return cap
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self._cap(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            await self._reject(send, cap)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > cap:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._reject(send, cap)

    async def _reject(self, send: Send, cap: int) -> None:
        body = json.dumps(
            {
                "type": "https://sam.dev/problems/payload-too-large",
                "title": "Request body too large",
                "status": 413,
                "detail": f"the request body is over {cap} bytes; big files go in chunks "
                "(`sam submit` sends the project so, `sam data put` a data set)",
            }
        ).encode()
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class SubmitBuckets:
    """One token bucket per tenant: `rate` submits per second, bursts up to `burst`."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst or max(1.0, rate * 2)
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, tenant: str) -> None:
        """Spend one token of `tenant`'s bucket or raise `RateLimited`."""
        if self.rate <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, last = self._state.get(tenant, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1:
                self._state[tenant] = (tokens, now)
                raise RateLimited(f"tenant {tenant!r} submits faster than {self.rate}/s; slow down")
            self._state[tenant] = (tokens - 1, now)
