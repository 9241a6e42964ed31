"""A minimal Server-Sent Events parser (the WHATWG `text/event-stream` format)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (default `message`), data lines joined by newlines, id."""

    event: str
    data: str
    id: str | None = None


def parse_sse(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Yield the events in a stream of lines (without line terminators), in order.

    A blank line dispatches the event being built; `:` lines are comments (keep-alives).
    """
    event_type, last_id = "", None
    data_lines: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data_lines:
                yield ServerSentEvent(event_type or "message", "\n".join(data_lines), last_id)
            event_type, data_lines = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event_type = value
        elif field == "data":
            data_lines.append(value)
        elif field == "id":
            last_id = value
    if data_lines:  # a stream that ends without the final blank line still delivers its event
        yield ServerSentEvent(event_type or "message", "\n".join(data_lines), last_id)
