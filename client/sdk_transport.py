"""The transport under client.sdk.SamClient: the connection, one retry after a transport error,
problem+json errors, and the helpers (timeout, idempotency key) the SDK's calls share."""

from __future__ import annotations

import sys
import time

from client import quickhttp
from client.config import DEFAULT_TIMEOUT_S, DEFAULT_URL, default_timeout_s
from client.errors import SamAPIError, SamConnectionError, SamTimeoutError

TYPE_CHECKING = False  # typing's import (and these) are spared on `sam submit`'s path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Self, TypeVar

    import httpx

    # A reply of either transport (httpx, or the plain-socket path); only the checker needs it.
    _Reply = TypeVar("_Reply", httpx.Response, quickhttp.QuickResponse)

API_PREFIX = "/api/v1"
__all__ = ["DEFAULT_TIMEOUT_S", "default_timeout_s"]  # the timeout is client.config's


class Transport:
    """A connection to one SAM server as one principal (its bearer token): the requests."""

    retry_delay_s = 0.5  # pause before the single retry of a failed connection

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout_s: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Connect lazily to `url` (with or without the `/api/v1` suffix) using `token`; wait
        `timeout_s` for an answer (default: SAM_TIMEOUT, else 30 s)."""
        base = url.rstrip("/")
        base = base[: -len(API_PREFIX)] if base.endswith(API_PREFIX) else base
        self.url = base
        self._headers = {"User-Agent": "sam-client/0.1", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout_s = default_timeout_s() if timeout_s is None else timeout_s
        self._transport = transport
        self._client: httpx.Client | None = None
        # Short JSON calls to a plain-http server go over a bare socket (client.quickhttp):
        # importing httpx is half of a short `sam` command's start-up. HTTPS, streams and
        # injected transports (tests' fakes) use httpx, imported on first use.
        self._quick = transport is None and base.startswith("http://")

    @property
    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            _silence_httpx_cli()
            self._client = httpx.Client(
                base_url=self.url + API_PREFIX,
                headers=self._headers,
                timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 10.0)),
                transport=self._transport,
                # A plain-http URL never negotiates TLS (redirects are not followed), so skip
                # loading the CA bundle: it costs 0.1-0.3 s on every command.
                verify=self.url.startswith("https://"),
            )
        return self._client

    def close(self) -> None:
        """Close the underlying connection pool."""
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------

    def _send(
        self, method: str, path: str, *, resend_after_reply: bool = True, **kwargs: Any
    ) -> httpx.Response | quickhttp.QuickResponse:
        """Send once, and once more after a transport failure.

        `resend_after_reply=False` retries only when the request surely never reached the
        server (connect failures), for calls that are not idempotent.
        """
        if self._quick:
            return self._send_quick(method, path, resend_after_reply, **kwargs)
        import httpx

        def failure(exc: Exception) -> tuple[bool, str] | None:
            if not isinstance(exc, httpx.TransportError):
                return None
            connect = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
            if isinstance(exc, httpx.TimeoutException) and not connect:
                raise SamTimeoutError(self.url, self._timeout_s) from exc
            return resend_after_reply or connect, reason(exc)

        return self._twice(lambda: self._http.request(method, path, **kwargs), failure)

    def _send_quick(
        self,
        method: str,
        path: str,
        resend_after_reply: bool,
        *,
        json: object = None,
        params: Mapping[str, object] | Sequence[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | quickhttp.FileBody | None = None,
    ) -> quickhttp.QuickResponse:
        url = self.url + API_PREFIX + path
        if params:
            from urllib.parse import urlencode

            url += "?" + urlencode(params, doseq=True)
        all_headers = {**self._headers, **(headers or {})}
        body: bytes | quickhttp.FileBody | None = content
        if json is not None:
            body = _json_dumps(json)
            all_headers["Content-Type"] = "application/json"

        def failure(exc: Exception) -> tuple[bool, str] | None:
            if not isinstance(exc, quickhttp.QuickHTTPError):
                return None
            if exc.timed_out:
                raise SamTimeoutError(self.url, self._timeout_s) from exc
            return resend_after_reply or not exc.sent, str(exc)

        return self._twice(
            lambda: quickhttp.request(url, method, all_headers, body, self._timeout_s), failure
        )

    def _twice(
        self,
        send: Callable[[], _Reply],
        failure: Callable[[Exception], tuple[bool, str] | None],
    ) -> _Reply:
        """`send()` once more after a transport error that `failure` calls retryable (it returns
        (retryable, reason), or None for an error that is not the transport's); an error
        response raises its problem. A request the server took but did not answer in time is
        not sent again (`failure` raises SamTimeoutError): a busy server gets no second copy."""
        for attempt in (1, 2):
            try:
                response = send()
            except Exception as exc:
                verdict = failure(exc)
                if verdict is None:
                    raise
                retryable, reason = verdict
                if attempt == 2 or not retryable:
                    raise SamConnectionError(self.url, reason) from exc
                time.sleep(self.retry_delay_s)
                continue
            if response.is_error:
                raise problem_from_response(response)
            return response
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise SamAPIError(
                response.status_code,
                "Unexpected response",
                f"{response.request.url} did not answer with JSON; is {self.url} a SAM server?",
            ) from None

    def _json_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """`_json` of an endpoint that answers with one JSON object."""
        body: dict[str, object] = self._json(method, path, **kwargs)
        return body

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any JSON endpoint under /api/v1 (uploads, data sets): its decoded answer."""
        return self._json(method, path, **kwargs)

    def put_bytes(self, path: str, data: bytes) -> Any:
        """PUT a raw body; its JSON answer."""
        headers = {"Content-Type": "application/octet-stream"}
        return self._send("PUT", path, content=data, headers=headers).json()

    def put_file(self, path: str, local: str, offset: int, size: int) -> Any:
        """PUT `size` bytes of file `local` from `offset` as the raw body (an upload's chunk);
        its JSON answer. Over plain HTTP the kernel sends them (sendfile): no read, no copy."""
        if self._quick:
            headers = {"Content-Type": "application/octet-stream"}
            body = quickhttp.FileBody(local, offset, size)
            return self._send_quick("PUT", path, True, headers=headers, content=body).json()
        with open(local, "rb") as handle:
            handle.seek(offset)
            return self.put_bytes(path, handle.read(size))


def new_idempotency_key() -> str:
    """A random key as `uuid.uuid4().hex` writes it (32 hex digits, version 4); built here
    because the uuid module imports platform, a noticeable part of a short command's start."""
    import os

    number = int.from_bytes(os.urandom(16), "big")
    number = (number & ~(0xC000 << 48)) | (0x8000 << 48)  # the RFC 4122 variant
    number = (number & ~(0xF000 << 64)) | (4 << 76)  # version 4
    return f"{number:032x}"


def _json_dumps(data: object) -> bytes:
    import json

    return json.dumps(data, separators=(",", ":")).encode()


def _silence_httpx_cli() -> None:
    """Keep httpx from importing its own command line.

    httpx's __init__ imports httpx._main, which imports rich and pygments when they happen to be
    installed: about half of httpx's import time. The client never uses that command line; a
    None entry in sys.modules makes the import fail at once, and httpx then defines a stub
    `main` (its fallback when rich is absent)."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def problem_from_response(response: httpx.Response | quickhttp.QuickResponse) -> SamAPIError:
    """Turn an error response (RFC 9457 problem+json, or anything else) into a SamAPIError."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        text = response.text.strip()[:500]
        return SamAPIError(response.status_code, response.reason_phrase or "HTTP error", text)
    detail = body.get("detail", "")
    errors = body.get("errors")
    if isinstance(detail, list):  # FastAPI's default validation error shape
        errors, detail = errors or detail, "the request is invalid"
    return SamAPIError(
        status=int(body.get("status") or response.status_code),
        title=str(body.get("title") or response.reason_phrase or "HTTP error"),
        detail=str(detail or ""),
        errors=errors if isinstance(errors, list) else None,
        type=str(body.get("type") or "about:blank"),
    )


def reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
