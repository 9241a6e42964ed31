"""Errors the `sam` client raises; each message tells the user what to do next."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's import is spared on `sam submit`'s path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class SamClientError(Exception):
    """Base class of every error the client reports to the user (exit status 1)."""


class SamAPIError(SamClientError):
    """The SAM server answered with an RFC 9457 problem (or another HTTP error)."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str = "",
        errors: Sequence[Mapping[str, object]] | None = None,
        type: str = "about:blank",
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = list(errors or [])
        self.type = type
        super().__init__(self.summary())

    def summary(self) -> str:
        """The one-line form `<title>: <detail>` (or just the title when there is no detail)."""
        return f"{self.title}: {self.detail}" if self.detail else self.title

    def field_messages(self) -> list[str]:
        """One `field: message` line per field error, in the server's order."""
        lines = []
        for item in self.errors:
            field = item.get("field") or item.get("loc") or ""
            if isinstance(field, list):
                field = ".".join(str(part) for part in field)
            message = item.get("message") or item.get("msg") or ""
            lines.append(f"{field}: {message}" if field else str(message))
        return lines


class SamConnectionError(SamClientError):
    """The client could not reach the server at all."""

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        self.reason = reason
        message = f"cannot reach SAM at {url}: is `sam up` running?"
        if reason:
            message += f" ({reason})"
        super().__init__(message)


class SamTimeoutError(SamClientError):
    """The server took the request but gave no answer in time: it is up, but busy."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        super().__init__(
            f"SAM at {url} is up but did not answer within {timeout_s:g} s: it is busy. The "
            "request may still take effect, so check before repeating it (`sam queue`, "
            "`sam status ID`); SAM_TIMEOUT=SECONDS waits longer."
        )


class JobSpecError(SamClientError):
    """The job file cannot be sent: unsafe or malformed YAML, or a file it names is missing."""


class ClientConfigError(SamClientError):
    """The client configuration file cannot be read; fix or remove it."""
