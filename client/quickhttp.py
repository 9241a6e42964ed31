"""One plain-HTTP request over a socket, for the CLI's short calls (`sam submit`, `sam queue`...).

Every `sam` call is a new process, and importing httpx (with http.client, email, ssl, anyio)
costs about half of a short command's start-up. A JSON request to a plain `http://` server
needs none of that: this module sends one HTTP/1.1 request with `Connection: close` and reads the
answer (Content-Length, chunked, or up to the close). HTTPS, streams (logs -f, downloads) and
tests' fake transports keep using httpx (client.sdk decides).
"""

from __future__ import annotations

import _socket  # socket.py imports selectors and builds enums: most of this path's import
import json

TYPE_CHECKING = False  # typing's import is spared on `sam submit`'s path
if TYPE_CHECKING:
    from typing import Any


class QuickHTTPError(OSError):
    """The request could not be sent or its answer could not be read."""

    def __init__(self, reason: str, *, sent: bool, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.sent = sent  # False: the server surely never saw the request (safe to resend)
        # True with `sent`: the server accepted the connection but did not answer in time
        self.timed_out = timed_out


class FileBody:
    """A request body that is a region of a file (an upload's chunk): the kernel sends it from
    the page cache (sendfile), never read into Python nor copied beside the request's head."""

    __slots__ = ("path", "offset", "size")

    def __init__(self, path: str, offset: int, size: int) -> None:
        self.path = path
        self.offset = offset
        self.size = size


class QuickRequest:
    def __init__(self, url: str) -> None:
        self.url = url


class QuickResponse:
    """The parts of an httpx.Response that client.sdk reads (a plain class: importing
    dataclasses costs a short command more than this whole module)."""

    def __init__(
        self, status_code: int, reason_phrase: str, headers: dict[str, str], content: bytes
    ) -> None:
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self.headers = headers
        self.content = content
        self.request = QuickRequest("")

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


def request(
    url: str,
    method: str,
    headers: dict[str, str],
    body: bytes | FileBody | None,
    timeout_s: float,
) -> QuickResponse:
    """Send `method url` (an `http://` URL with its query) and return the whole answer."""
    netloc, host, port, target = split_url(url)
    lines = [f"{method} {target} HTTP/1.1", f"Host: {netloc}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {body.size if isinstance(body, FileBody) else len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    try:
        conn = connect(host, port, min(timeout_s, 10.0))
    except OSError as exc:
        raise QuickHTTPError(_reason(exc), sent=False) from exc
    try:
        conn.settimeout(timeout_s)
        if isinstance(body, FileBody):
            conn.sendall(head)
            _send_file(conn, body, timeout_s)
        elif body is not None and len(body) > 65536:
            conn.sendall(head)  # a big body is not copied to follow the head
            conn.sendall(body)
        else:
            conn.sendall(head + (body or b""))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    except TimeoutError as exc:
        raise QuickHTTPError("no answer in time", sent=True, timed_out=True) from exc
    except OSError as exc:
        raise QuickHTTPError(_reason(exc), sent=True) from exc
    finally:
        conn.close()
    response = parse_response(b"".join(chunks))
    response.request = QuickRequest(url)
    return response


def _send_file(conn: _socket.socket, body: FileBody, timeout_s: float) -> None:
    """Send `body`'s file region on `conn` with sendfile (the socket has a timeout, so it is
    non-blocking underneath: wait until it can take more, at most `timeout_s` each time)."""
    import os
    import select

    with open(body.path, "rb") as source:
        offset, left = body.offset, body.size
        while left:
            try:
                sent = os.sendfile(conn.fileno(), source.fileno(), offset, left)
            except BlockingIOError:
                if not select.select([], [conn], [], timeout_s)[1]:
                    raise TimeoutError from None
                continue
            if sent == 0:
                raise OSError(f"{body.path} ended before the {body.size} bytes announced")
            offset += sent
            left -= sent


def connect(host: str, port: int, timeout_s: float) -> _socket.socket:
    """socket.create_connection's loop over the host's addresses, on the C module."""
    # An ASCII name goes as bytes: a str would load the idna codec (and stringprep) to encode it.
    name = host.encode("ascii") if host.isascii() else host.encode("idna")
    error: OSError | None = None
    for family, kind, proto, _canonical, address in _socket.getaddrinfo(
        name, port, 0, _socket.SOCK_STREAM
    ):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"no address found for {host}")


def split_url(url: str) -> tuple[str, str, int, str]:
    """(netloc, host, port, request target) of an `http://` URL; urllib.parse (and the
    ipaddress module it imports) only for the forms a plain split would misread."""
    netloc, slash, rest = url.removeprefix("http://").partition("/")
    if "@" in netloc or "[" in netloc or "#" in rest or not url.startswith("http://"):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return parts.netloc, parts.hostname or "127.0.0.1", parts.port or 80, target
    host, colon, port = netloc.partition(":")
    if colon and port and not port.isdigit():
        raise QuickHTTPError(f"bad port in {url!r}", sent=False)
    return netloc, host or "127.0.0.1", int(port) if port else 80, "/" + rest


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
