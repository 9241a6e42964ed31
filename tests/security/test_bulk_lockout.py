"""A tenant's bulk work on a large array never locks the others out (issue 29: cancelling a
100,000-task array held SQLite's write lock for minutes; another tenant's `GET /jobs` timed out
and the same user's submits waited on its token row; its submit took 11.9 s). Through a real
HTTP server, on SQLite and PostgreSQL: while an array's submit, cancel or hold runs, chunk by
chunk, another tenant lists and submits and the array's own user submits, and each is answered
before the bulk change ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from tests.api.helpers import MODEL_PY, make_tenant, make_user, spec
from tests.conftest import LiveServer

N = 4_000
CHUNK = 200  # 20 chunks with a pause after each: the cancel lasts a few seconds


@pytest.fixture
def server(settings) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    slow = settings.updated(bulk_chunk_rows=CHUNK, bulk_pause_s=0.15)
    with LiveServer(slow) as live:
        yield live


def _submit(api: httpx.Client, who: dict[str, str], **keys: Any) -> httpx.Response:
    body = {"spec": {**spec("job"), **keys}, "files": {"model.py": MODEL_PY}}
    return api.post("/api/v1/jobs", json=body, headers=who)


@pytest.mark.parametrize("verb", ["submit", "cancel", "hold"])
def test_other_requests_are_answered_while_an_array_changes(server, settings, verb):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=server.url, timeout=60) as api:
        make_tenant(api, "big")
        make_tenant(api, "small")
        hog = make_user(api, "big", "hog")
        other = make_user(api, "small", "other")
        array_id = ""
        if verb != "submit":
            made = _submit(api, hog, array=f"0-{N - 1}")
            assert made.status_code == 201, made.text
            array_id = made.json()["id"]
        answer: dict[str, Any] = {}

        def bulk() -> None:
            with httpx.Client(base_url=server.url, timeout=300) as own:
                if verb == "submit":  # the array's own submit writes its tasks chunk by chunk
                    answer["r"] = _submit(own, hog, array=f"0-{N - 1}")
                else:
                    answer["r"] = own.post(f"/api/v1/jobs/{array_id}/{verb}", headers=hog)

        worker = threading.Thread(target=bulk)
        worker.start()
        during: list[tuple[str, int]] = []
        try:
            while worker.is_alive():
                listed = api.get("/api/v1/jobs", headers=other)
                small = _submit(api, other)
                mine = _submit(api, hog)  # the same user's token row is not held either
                if worker.is_alive():  # all three answered before the bulk change ended
                    during += [
                        ("list", listed.status_code),
                        ("submit", small.status_code),
                        ("own submit", mine.status_code),
                    ]
        finally:
            worker.join(300)
    assert answer["r"].status_code in (200, 201, 202), answer["r"].text
    if verb == "submit":
        array_id = answer["r"].json()["id"]
    else:
        assert answer["r"].json()["changed_count"] == N
    assert during, "no other request was answered while the bulk change ran"
    assert {code for _, code in during if _ == "list"} == {200}
    assert {code for what, code in during if what != "list"} == {201}
    with session_scope(settings.resolved_database_url) as s:
        state = "cancelled" if verb == "cancel" else "queued"  # held tasks stay queued
        done = s.execute(
            select(func.count()).where(Job.array_job_id == array_id, Job.state == state)
        ).scalar_one()
        assert done == N
