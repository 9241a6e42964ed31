"""The `/api/v1/events` hub (one poll per process for every stream) through a real HTTP
server: a state change that commits after a later one is still sent, and its `id:` lets a
resume find it; followers of different tenants share the poll but not each other's jobs; a
follower that stops reading is dropped instead of growing the server's memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from sam_server.api import livehub
from sam_server.db.models import Job, JobMetric, Wafer
from sam_server.db.session import engine_for, session_scope
from sam_server.services import observe
from sam_server.services.transitions import transition
from tests.api.helpers import alice_and_eve, alice_job, make_tenant, make_user, submit

SSE = {"Accept": "text/event-stream"}


@pytest.fixture
def readers(live_server) -> Iterator[list[Reader]]:  # type: ignore[no-untyped-def]
    """Readers to hang up before the server stops (an open stream would keep the test server,
    and its poll of the test database, running past the test)."""
    opened: list[Reader] = []
    yield opened
    for reader in opened:
        reader.hang_up()
    deadline = time.monotonic() + 20  # one deadline for all of them, not 10 s each
    for reader in opened:
        reader.thread.join(max(0.0, deadline - time.monotonic()))
        reader.client.close()
    assert not any(reader.thread.is_alive() for reader in opened), "a stream did not end"


class Reader:
    """An `/api/v1/events` stream read on a thread: `(event, data, id)` triples as they come."""

    def __init__(self, url: str, headers: dict[str, str], opened: list[Reader]) -> None:
        self.url, self.headers = url, headers | SSE
        self.events: list[tuple[str, Any, str | None]] = []
        self.client = httpx.Client(base_url=url, timeout=60)
        self.socket: socket.socket | None = None
        self.hung_up = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        opened.append(self)

    def hang_up(self) -> None:
        """Shut the stream's socket, so that the reading thread's blocked read returns now.
        Closing the client from this thread would leave that read blocked until the server's
        next heartbeat (15 s)."""
        self.hung_up = True
        if self.socket is not None:
            with contextlib.suppress(OSError):
                self.socket.shutdown(socket.SHUT_RDWR)

    def _read(self) -> None:
        event, event_id = "message", None
        with (
            contextlib.suppress(httpx.HTTPError),
            self.client.stream("GET", "/api/v1/events", headers=self.headers) as r,
        ):
            self.socket = r.extensions["network_stream"].get_extra_info("socket")
            if self.hung_up:  # hung up while the request was on its way
                return
            for line in r.iter_lines():
                if line.startswith("id:"):
                    event_id = line.split(":", 1)[1].strip()
                elif line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    self.events.append((event, json.loads(line.split(":", 1)[1]), event_id))
                    event, event_id = "message", None
                    if self.events[-1][0] in ("end", "shutdown"):
                        return

    def jobs(self) -> list[tuple[dict[str, Any], str | None]]:
        return [(data, i) for e, data, i in self.events if e == "job"]

    def wait(self, test: Any, limit_s: float = 20) -> None:
        deadline = time.monotonic() + limit_s
        while not test(self):
            assert time.monotonic() < deadline, self.events
            time.sleep(0.05)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_change_that_commits_late_is_sent_and_resumable(live_server, settings, readers):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        slow, fast = (submit(client, alice).json()["id"] for _ in range(2))
        reader = Reader(live_server.url, alice, readers)
        reader.wait(lambda r: any(e == "cluster" for e, _, _ in r.events))
        # A transaction takes an event id and holds it uncommitted ...
        held = Session(engine_for(url), expire_on_commit=False)
        try:
            transition(held, held.get(Job, slow), "compiling", reason="late")
            held.flush()
            # ... while a later one (a higher id) commits and is streamed.
            with session_scope(url) as s:
                transition(s, s.get(Job, fast), "compiling")
            reader.wait(lambda r: any(j["id"] == fast for j, _ in r.jobs()))
            time.sleep(1.5)  # polls pass while the lower id is still invisible
            assert all(j["id"] != slow for j, _ in reader.jobs())
            held.commit()
        finally:
            held.close()
        reader.wait(lambda r: any(j["id"] == slow for j, _ in r.jobs()))
        (first, first_id), (late, late_id) = reader.jobs()
        assert (first["id"], late["id"]) == (fast, slow)
        assert late["event"]["reason"] == "late"
        # The later change's `id:` stayed below the pending one: a client that dropped right
        # after it and resumed would still get the late change (and the later one again).
        slow_event_id = int(late_id or 0)
        assert int(first_id or 0) < slow_event_id
        resumed = Reader(live_server.url, alice | {"Last-Event-ID": str(first_id)}, readers)
        resumed.wait(lambda r: {j["id"] for j, _ in r.jobs()} >= {slow})


def test_followers_share_one_poll_but_see_only_their_tenant(live_server, settings, readers):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        alice, eve = alice_and_eve(client)
        admin = {"Authorization": f"Bearer {settings.admin_token}"}
        for who in (alice, eve, admin):
            for _ in range(5):
                Reader(live_server.url, who, readers)
        for reader in readers:
            reader.wait(lambda r: any(e == "cluster" for e, _, _ in r.events))
        hub = live_server.server.config.app.state.event_hub
        polls = hub.polls
        time.sleep(2)
        # 15 streams, one poll every 0.5 s for all of them (not 15 per tick).
        assert hub.polls - polls <= 6, hub.polls - polls
        mine, theirs = submit(client, alice).json()["id"], submit(client, eve).json()["id"]
        with session_scope(url) as s:
            transition(s, s.get(Job, mine), "compiling")
            transition(s, s.get(Job, theirs), "compiling")
        for reader in readers:
            reader.wait(lambda r: len({j["id"] for j, _ in r.jobs()}) >= 1)
        time.sleep(1)
        seen = [{j["id"] for j, _ in r.jobs()} for r in readers]
        assert seen == [{mine}] * 5 + [{theirs}] * 5 + [{mine, theirs}] * 5


def test_a_follower_that_stops_reading_is_dropped(client, settings, monkeypatch):
    monkeypatch.setattr(livehub, "MAX_BACKLOG", 3)
    url = settings.resolved_database_url
    make_tenant(client, "acme")
    alice = make_user(client, "acme", "alice")
    jobs = [submit(client, alice).json()["id"] for _ in range(8)]

    async def main() -> tuple[int, list[str]]:
        hub = livehub.EventHub(sessionmaker(engine_for(url), expire_on_commit=False))
        reading = await hub.subscribe(
            viewer=viewer, authorization=alice["Authorization"], after=None
        )
        stuck = await hub.subscribe(viewer=viewer, authorization=alice["Authorization"], after=None)
        assert hub._task is not None
        hub._task.cancel()  # the test polls by hand
        got: list[str] = []
        for job_id in jobs:
            with session_scope(url) as s:
                transition(s, s.get(Job, job_id), "compiling")
            await hub.poll_once()
            while not reading.queue.empty():
                got.append(reading.queue.get_nowait()[1])
        assert stuck not in hub.followers and reading in hub.followers
        size = stuck.queue.qsize()
        final = [stuck.queue.get_nowait() for _ in range(size)][-1]
        assert final[0] and "event: shutdown" in final[1]  # told to resume, then forgotten
        return size, got

    with session_scope(url) as s:
        viewer = f"t{s.get(Job, jobs[0]).tenant_id}"
    size, got = asyncio.run(main())
    assert size <= livehub.MAX_BACKLOG + 1  # bounded: a batch per tick, then the shutdown
    text = "".join(got)  # the follower that reads gets every change
    assert all(job_id in text for job_id in jobs)


def test_metrics_streams_of_one_job_share_one_poll(live_server, settings):
    url = settings.resolved_database_url
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        alice, job_id = alice_job(client)
        with session_scope(url) as s:
            job = s.get(Job, job_id)
            for state in ("compiling", "pending", "running"):
                transition(s, job, state)
        got: list[list[tuple[str, str]]] = [[] for _ in range(8)]

        def read(out: list[tuple[str, str]]) -> None:
            path = f"{live_server.url}/api/v1/jobs/{job_id}/metrics"
            with httpx.stream("GET", path, headers=alice | SSE, timeout=60) as r:
                event = ""
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        event = line.split(":", 1)[1].strip()
                    elif line.startswith("data:"):
                        out.append((event, line.split(":", 1)[1].strip()))
                        if event == "end":
                            return

        threads = [threading.Thread(target=read, args=(out,), daemon=True) for out in got]
        for thread in threads:
            thread.start()
        hub = live_server.server.config.app.state.metrics_hub
        deadline = time.monotonic() + 20
        while sum(len(c.queues) for c in hub.channels.values()) < len(got):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        polls, began = hub.polls, time.monotonic()
        for step in range(3):
            with session_scope(url) as s:
                s.add(
                    JobMetric(job_id=job_id, step=step, loss=1.0, sim_cycles=1, samples_per_sec=1.0)
                )
            time.sleep(0.3)
        with session_scope(url) as s:
            transition(s, s.get(Job, job_id), "succeeded")
        for thread in threads:
            thread.join(20)
        ticks = (time.monotonic() - began) / 0.5
        # 8 streams, one poll per tick for all of them (not 8 per tick)
        assert hub.polls - polls <= ticks + 2, (hub.polls - polls, ticks)
        for out in got:
            steps = [json.loads(d)["step"] for e, d in out if e == "step"]
            assert steps == [0, 1, 2] and out[-1] == ("end", '{"state": "succeeded"}')


def test_a_revoked_token_ends_its_event_streams(live_server, settings, readers):
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        bob = make_user(client, "acme", "bob")
        gone, kept = Reader(live_server.url, alice, readers), Reader(live_server.url, bob, readers)
        for reader in (gone, kept):
            reader.wait(lambda r: any(e == "cluster" for e, _, _ in r.events))
        (token,) = client.get("/api/v1/tokens", headers=alice).json()
        r = client.post(f"/api/v1/tokens/{token['id']}/revoke", headers=alice)
        assert r.status_code == 200, r.text
        gone.wait(
            lambda r: any(e == "end" for e, _, _ in r.events), limit_s=livehub.AUTH_EVERY_S + 10
        )
        assert "error" in gone.events[-1][1]
        assert all(e != "end" for e, _, _ in kept.events)  # bob's token still streams


def test_cluster_views_from_one_read_hide_other_tenants(client, settings):
    url = settings.resolved_database_url
    alice, eve = alice_and_eve(client)
    mine, theirs = submit(client, alice).json()["id"], submit(client, eve).json()["id"]
    queued = submit(client, eve).json()["id"]
    with session_scope(url) as s:
        s.add(Wafer(id="w0", arch="wse2", rows=16, cols=16, state="online"))
        s.flush()
        for col, job_id in enumerate((mine, theirs)):
            job = s.get(Job, job_id)
            job.state, job.wafer_id = "running", "w0"
            job.region_row, job.region_col, job.region_rows, job.region_cols = 0, col * 8, 8, 8
        tenants = {s.get(Job, j).tenant_id for j in (mine, theirs)}
        s.get(Job, queued).state = "queued"
        acme = f"t{s.get(Job, mine).tenant_id}"
    with session_scope(url) as s:
        views = observe.cluster_views(s, viewers=[acme, observe.ADMIN_VIEW])
    assert len(tenants) == 2
    allocs = {a["col"]: a for a in views[acme]["wafers"][0]["allocations"]}
    assert (allocs[0]["job_id"], allocs[0]["tenant"]) == (mine, "acme")
    assert (allocs[8]["job_id"], allocs[8]["tenant"]) == (None, None)  # the region, no name
    every = {a["job_id"] for a in views[observe.ADMIN_VIEW]["wafers"][0]["allocations"]}
    assert every == {mine, theirs}
    assert views[acme]["compile_queue"]["queued_mine"] == 0
    assert views[observe.ADMIN_VIEW]["compile_queue"]["queued_mine"] >= 1
    # The single-viewer form `GET /cluster` uses is the same view.
    assert client.get("/api/v1/cluster", headers=alice).json()["wafers"] == json.loads(
        json.dumps(views[acme]["wafers"])
    )
