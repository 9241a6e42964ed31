"""client.quickhttp: the bare-socket HTTP path of the CLI's short calls (its answers parsed as
httpx would), and the slurm time forms `sam acct` takes."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from client.quickhttp import QuickHTTPError, parse_response, request
from client.slurmtime import SlurmTimeError, parse_slurm_time


def test_content_length_chunked_and_close_delimited_answers() -> None:
    fixed = parse_response(b'HTTP/1.1 201 Created\r\nContent-Length: 9\r\n\r\n{"a": 1}\nextra')
    assert (fixed.status_code, fixed.reason_phrase, fixed.json()) == (201, "Created", {"a": 1})
    chunked = parse_response(
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"ti\r\nb;ext=1\r\ntle": "x"}\r\n0\r\n\r\n'
    )
    assert chunked.is_error and chunked.json() == {"title": "x"}
    assert parse_response(b"HTTP/1.1 200 OK\r\n\r\nplain").text == "plain"
    with pytest.raises(QuickHTTPError):
        parse_response(b"garbage without a blank line")


def test_a_refused_connection_is_known_unsent() -> None:
    with pytest.raises(QuickHTTPError) as caught:
        request("http://127.0.0.1:9/api/v1/whoami", "GET", {}, None, 2.0)
    assert caught.value.sent is False  # safe to resend even a non-idempotent call


def test_slurm_time_forms() -> None:
    now = datetime(2026, 12, 1, 15, 30, 0).astimezone()
    assert parse_slurm_time("now-7days", now) == now - timedelta(days=7)
    assert parse_slurm_time("now+2hours", now) == now + timedelta(hours=2)
    assert parse_slurm_time("now-90", now) == now - timedelta(seconds=90)
    assert parse_slurm_time("today", now) == now.replace(hour=0, minute=0, second=0)
    assert parse_slurm_time("teatime", now).hour == 16
    assert parse_slurm_time("2026-11-02T08:05", now) == now.replace(
        month=11, day=2, hour=8, minute=5, second=0
    )
    assert parse_slurm_time("1102", now) == now.replace(month=11, day=2, hour=0, minute=0, second=0)
    assert parse_slurm_time("11/02/25-10:00", now) == now.replace(
        year=2025, month=11, day=2, hour=10, minute=0, second=0
    )
    assert parse_slurm_time("4:15pm", now) == now.replace(hour=16, minute=15, second=0)
    for bad in ("yesterday", "now-3fortnights", "13/45", "2026-02-30"):
        with pytest.raises(SlurmTimeError):
            parse_slurm_time(bad, now)
