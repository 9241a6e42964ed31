"""Bounds on text a tenant can make SAM store or return (error messages, log lines).

A tenant controls the text of its model's exceptions and its make_batch output; without a cap a
30 MB exception would be stored (twice) and returned in every listing. Text over the cap keeps
its head and says how much was cut, so the cut is never silent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sam_domain.json_value import JsonObject

MAX_TEXT_BYTES = 64 * 1024  # an error message or one log line, stored and returned in full
SUMMARY_BYTES = 512  # an error message inside a listing (GET /jobs, /queue)
LOG_ERROR_BYTES = 2048  # the copy of a failure's text in the job's log


def cap_text(text: str | None, limit: int = MAX_TEXT_BYTES) -> str:
    """`text` if its UTF-8 form fits `limit` bytes, else its head and `… [cut: N bytes]`."""
    if not text:
        return text or ""
    if len(text) * 4 <= limit:  # fast path: no character takes more than 4 bytes
        return text
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    marker = f"… [cut: {len(data) - limit} bytes]"
    head = data[: max(0, limit - len(marker.encode()))].decode("utf-8", "ignore")
    return head + f"… [cut: {len(data) - len(head.encode())} bytes]"


def cap_error(error: tuple[str, str] | None) -> tuple[str, str] | None:
    """An error `(kind, message)` with the message capped."""
    return None if error is None else (error[0], cap_text(error[1]))


MAX_SUMMARY_BYTES = 256 * 1024  # a compile summary: a few KiB normally


def cap_json(
    value: Mapping[str, object] | None, limit: int = MAX_SUMMARY_BYTES
) -> JsonObject | None:
    """`value` as the JSON column stores it if that fits `limit` bytes, else a small stand-in
    that says it was dropped (a summary carries values the sandboxed trace reported, which tenant
    code can inflate)."""
    if value is None:
        return None
    text = json.dumps(value, default=str)
    size = len(text.encode())
    if size <= limit:
        stored: JsonObject = json.loads(text)
        return stored
    keep: JsonObject = {
        k: v
        for k, v in value.items()
        if k in ("artifact_path", "artifact_sha256") and (v is None or isinstance(v, str))
    }
    return dict(keep, cut=f"the compile summary was {size} bytes, over {limit}; dropped")
