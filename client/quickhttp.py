"""One plain-HTTP request over a socket, for the CLI's short calls (`sam submit`, `sam queue`...).

Every `sam` call is a new process, and importing httpx (with http.client, email, ssl, anyio)
costs about half of a short command's start-up. A JSON request to a plain `http://` server
needs none of that: this module sends one HTTP/1.1 request with `Connection: close` and reads the
answer (Content-Length, chunked, or up to the close). HTTPS, streams (logs -f, downloads) and
tests' fake transports keep using httpx (client.sdk decides).
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class QuickHTTPError(OSError):
    """The request could not be sent or its answer could not be read."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.sent = sent  # False: the server surely never saw the request (safe to resend)


@dataclass
class QuickRequest:
    url: str


@dataclass
class QuickResponse:
    """The parts of an httpx.Response that client.sdk reads."""

    status_code: int
    reason_phrase: str
    headers: dict[str, str]
    content: bytes
    request: QuickRequest = field(default_factory=lambda: QuickRequest(""))

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


def request(
    url: str, method: str, headers: dict[str, str], body: bytes | None, timeout_s: float
) -> QuickResponse:
    """Send `method url` (an `http://` URL with its query) and return the whole answer."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    try:
        conn = socket.create_connection((host, port), timeout=min(timeout_s, 10.0))
    except OSError as exc:
        raise QuickHTTPError(_reason(exc), sent=False) from exc
    with conn:
        conn.settimeout(timeout_s)
        try:
            conn.sendall(head + (body or b""))
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except OSError as exc:
            raise QuickHTTPError(_reason(exc), sent=True) from exc
    response = parse_response(b"".join(chunks))
    response.request = QuickRequest(url)
    return response


def parse_response(raw: bytes) -> QuickResponse:
    """An HTTP/1.1 answer read up to the server's close."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise QuickHTTPError("the server closed the connection before answering", sent=True)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        _version, code, *phrase = status_line.split(" ", 2)
        status = int(code)
    except ValueError:
        raise QuickHTTPError(f"not an HTTP answer: {status_line[:80]!r}", sent=True) from None
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        content = _dechunk(rest)
    elif "content-length" in headers:
        content = rest[: int(headers["content-length"])]
    else:
        content = rest
    return QuickResponse(status, phrase[0] if phrase else "", headers, content)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)


def _reason(exc: OSError) -> str:
    return str(exc).strip() or type(exc).__name__
