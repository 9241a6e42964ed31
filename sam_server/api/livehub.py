"""The `/api/v1/events` streams of one server process, fed by one database poll per tick.

Every open dashboard page holds such a stream. Each used to poll the database itself every tick
(a thread and three queries per page per tick: 200 pages made `GET /jobs` 40x slower); the hub
reads the state changes, running jobs' progress and the cluster view once per tick, for every
tenant at once, and hands each follower the part its principal may see (a user: its tenant's
jobs; the cluster admin: all), as text rendered once per tick and viewer.

Delivery guarantees, as before the hub: `id:` on every `job` event and `Last-Event-ID` resume,
heartbeats on a quiet stream, `shutdown` when the server drains, `end` when the token is
revoked. On PostgreSQL a state change can commit after one with a higher id (ids are taken at
insert, not at commit): the ids the hub skipped are kept as gaps and read again every tick
until they appear or GAP_WAIT_S passes, and the `id:` sent never passes the lowest gap, so a
resume re-reads rather than loses a late change. A follower more than MAX_BACKLOG batches behind
is dropped with `shutdown` (its client resumes from its last id): memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from sam_server.api.deps import principal_from_header
from sam_server.api.stream import ENDED, FanOut, relay, sse
from sam_server.services import live
from sam_server.services.observe import job_visible

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger("sam.server.events")

GAP_WAIT_S = 30.0  # how long a skipped id may still commit (longer than any SAM transaction)
MAX_GAPS = 5_000  # skipped ids remembered at most (the newest)
START_WINDOW = 500  # ids below the newest checked for uncommitted ones when the hub starts
AUTH_EVERY_S = 5.0  # followers' tokens are checked again this often (a revoked one ends)
MAX_BACKLOG = 100  # undelivered batches (ticks) before a slow follower is dropped
MAX_CATCH_UP = 5_000  # changes sent to a resumed follower at once; it resumes for the rest

Batch = tuple[bool, str]  # (the last of the stream, SSE text)


@dataclass(eq=False)
class Follower:
    """One open `/api/v1/events` stream."""

    viewer: str  # observe.viewer_key of its principal
    authorization: str | None
    floor: int  # Last-Event-ID: changes up to it were received already (0: none)
    resume: bool  # changes above `floor` up to the hub's cursor are still to be read
    queue: asyncio.Queue[Batch] = field(default_factory=asyncio.Queue)
    fresh: bool = True  # the cluster view and every running job's progress not yet sent


class EventHub:
    """Per-process fan-out of job state changes, progress and the cluster view."""

    def __init__(
        self,
        sessions: sessionmaker,  # type: ignore[type-arg]
        *,
        poll_s: float = 0.5,
        heartbeat_s: float = 15.0,
        stale_s: float = 15.0,
    ) -> None:
        self.sessions = sessions
        self.poll_s, self.heartbeat_s, self.stale_s = poll_s, heartbeat_s, stale_s
        self.followers: set[Follower] = set()
        self.draining = False
        self.polls = 0  # database polls made, for tests and the benchmark
        self.cursor: int | None = None  # the highest change id read (None: not started)
        self.gaps: dict[int, float] = {}  # skipped ids -> when first missed (monotonic)
        self.progress: dict[str, tuple[int, int, int | None, float | None]] = {}
        self.clusters: dict[str, tuple[str, str]] = {}  # viewer -> (json, SSE text)
        self.gauge: Any = None  # prometheus Gauge of open streams, when the app sets one
        self.poll_counter: Any = None  # prometheus Counter of polls, when the app sets one
        self._auth_due = 0.0
        self._task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._limiter = anyio.CapacityLimiter(1)  # the poll's own thread

    async def subscribe(
        self, *, viewer: str, authorization: str | None, after: int | None
    ) -> Follower:
        """A new follower; `after` is its Last-Event-ID (None: only changes from now on)."""
        follower = Follower(viewer, authorization, after or 0, after is not None)
        async with self._starting:
            if self._task is None or self._task.done():
                # No one listened: start from the newest change, with a fresh view.
                self.progress, self.clusters = {}, {}
                await self._start()
                self._task = asyncio.get_running_loop().create_task(self._poll_forever())
            self.followers.add(follower)
        if self.gauge is not None:
            self.gauge.inc()
        if self.draining:
            self._end(follower, _shutdown())
        return follower

    def unsubscribe(self, follower: Follower) -> None:
        if follower in self.followers:
            self.followers.discard(follower)
            if self.gauge is not None:
                self.gauge.dec()

    def drain(self) -> None:
        """Tell every follower the server is going away (they end their streams at once)."""
        self.draining = True
        for follower in list(self.followers):
            self._end(follower, _shutdown())

    async def close(self) -> None:
        self.drain()
        await _stop(self._task)

    async def _poll_forever(self) -> None:
        while self.followers:
            try:
                await self.poll_once()
            except Exception:  # noqa: BLE001 - a database hiccup must not end every stream
                log.exception("event poll failed; retrying")
            await asyncio.sleep(self.poll_s)

    async def _run(self, fn: Any) -> Any:
        def work() -> Any:
            with self.sessions() as session:
                return fn(session)

        return await anyio.to_thread.run_sync(work, limiter=self._limiter)

    async def poll_once(self) -> None:
        """One database read for every follower; deliver what each may see."""
        followers = [f for f in self.followers]
        if not followers or self.draining:
            return
        if self.cursor is None:
            await self._start()
        cursor = self.cursor or 0
        pending = sorted(self.gaps)
        viewers = {f.viewer for f in followers}
        resumes = {(f.viewer, f.floor) for f in followers if f.resume and f.floor < cursor}
        now = time.monotonic()
        tokens = {f.authorization for f in followers} if now >= self._auth_due else set()

        def read(session: Session) -> tuple[Any, ...]:
            polled = live.poll(
                session, after=cursor, gaps=pending, viewers=viewers, stale_s=self.stale_s
            )
            caught = {
                key: _catch_up(session, key[0], key[1], cursor, set(pending)) for key in resumes
            }
            refused: dict[str | None, str] = {}
            for token in tokens:
                try:
                    principal_from_header(session, token)
                except Exception as exc:  # noqa: BLE001 - revoked or unknown: end its streams
                    refused[token] = str(exc)[:200]
            return polled, caught, refused

        polled, caught, refused = await self._run(read)
        self.polls += 1
        if self.poll_counter is not None:
            self.poll_counter.inc()
        if tokens:
            self._auth_due = now + AUTH_EVERY_S
        safe = self._advance(cursor, polled, now)
        changes = [(c, sse("job", json.dumps(c.view), min(c.id, safe))) for c in polled.changes]
        moved = {
            job_id: row
            for job_id, row in polled.progress.items()
            if (old := self.progress.get(job_id)) is None or (old[1], old[3]) != (row[1], row[3])
        }
        self.progress = polled.progress
        cluster_changed = self._clusters(polled.clusters)
        progress_text: dict[tuple[str, bool], str] = {}
        for follower in followers:
            if follower not in self.followers:
                continue  # left while the poll read
            if follower.authorization in refused:
                error = json.dumps({"error": refused[follower.authorization]})
                self._end(follower, sse("end", error))
                continue
            parts: list[str] = []
            if follower.fresh:
                parts.append(self.clusters[follower.viewer][1])
            done = True
            if follower.resume:
                if (follower.viewer, follower.floor) in caught:
                    missed, done = caught[(follower.viewer, follower.floor)]
                    parts += [sse("job", json.dumps(c.view), min(c.id, safe)) for c in missed]
                follower.resume = False
            if not done:  # more missed than one batch: it resumes from the last id sent
                self._deliver(follower, parts, final=_shutdown())
                continue
            parts += [
                text
                for change, text in changes
                if change.id > follower.floor and job_visible(follower.viewer, change.tenant_id)
            ]
            key = (follower.viewer, follower.fresh)
            if key not in progress_text:
                rows = polled.progress if follower.fresh else moved
                progress_text[key] = _progress(rows, follower.viewer)
            if progress_text[key]:
                parts.append(progress_text[key])
            if not follower.fresh and follower.viewer in cluster_changed:
                parts.append(self.clusters[follower.viewer][1])
            follower.fresh = False
            if parts:
                self._deliver(follower, parts)

    async def _start(self) -> None:
        """The cursor at the newest change; ids below it not visible yet are gaps."""

        def read(session: Session) -> tuple[int, list[int]]:
            top = live.newest_event_id(session)
            return top, live.event_ids_above(session, above=max(0, top - START_WINDOW))

        top, seen = await self._run(read)
        now = time.monotonic()
        present = set(seen)
        self.gaps = {i: now for i in range(max(0, top - START_WINDOW) + 1, top) if i not in present}
        self.cursor = top

    def _advance(self, cursor: int, polled: live.Poll, now: float) -> int:
        """Move the cursor past what was read, note the ids skipped as gaps, forget gaps that
        appeared or waited too long; the id every follower may resume from (`safe`)."""
        read = {c.id for c in polled.changes}
        top = max((i for i in read if i > cursor), default=cursor)
        for i in range(max(cursor + 1, top - MAX_GAPS), top):
            if i not in read:
                self.gaps[i] = now
        for i in read:
            self.gaps.pop(i, None)
        expired = [i for i, since in self.gaps.items() if now - since > GAP_WAIT_S]
        for i in expired:
            del self.gaps[i]
        if len(self.gaps) > MAX_GAPS:
            for i in sorted(self.gaps)[: len(self.gaps) - MAX_GAPS]:
                del self.gaps[i]
        self.cursor = top
        return min(self.gaps) - 1 if self.gaps else top

    def _clusters(self, views: dict[str, dict[str, Any]]) -> set[str]:
        """Store each viewer's cluster view; the viewers whose view changed."""
        changed = set()
        for viewer, view in views.items():
            text = json.dumps(view, sort_keys=True)
            if viewer not in self.clusters or self.clusters[viewer][0] != text:
                self.clusters[viewer] = (text, sse("cluster", text))
                changed.add(viewer)
        for viewer in set(self.clusters) - set(views):
            del self.clusters[viewer]
        return changed

    def _deliver(self, follower: Follower, parts: list[str], final: str | None = None) -> None:
        if follower.queue.qsize() >= MAX_BACKLOG:  # too slow: it resumes from its last id
            self._end(follower, _shutdown())
            return
        if final is not None:
            self.unsubscribe(follower)
            follower.queue.put_nowait((True, "".join(parts) + final))
        else:
            follower.queue.put_nowait((False, "".join(parts)))

    def _end(self, follower: Follower, text: str) -> None:
        self.unsubscribe(follower)
        follower.queue.put_nowait((True, text))


def _catch_up(
    session: Session, viewer: str, after: int, upto: int, skip: set[int]
) -> tuple[list[live.Change], bool]:
    """A resumed follower's missed changes (at most MAX_CATCH_UP); whether that was all."""
    out: list[live.Change] = []
    while len(out) < MAX_CATCH_UP:
        chunk, more = live.catch_up(session, viewer=viewer, after=after, upto=upto, skip=skip)
        out += chunk
        if more is None:
            return out, True
        after = more
    return out, False


def _progress(rows: dict[str, tuple[int, int, int | None, float | None]], viewer: str) -> str:
    items = [
        {"id": job_id, "step": step, "total_steps": total, "loss": loss}
        for job_id, (tenant_id, step, total, loss) in rows.items()
        if job_visible(viewer, tenant_id)
    ]
    return sse("progress", json.dumps({"items": items})) if items else ""


async def _stop(task: asyncio.Task[None] | None) -> None:
    """Cancel a poller and wait for it: a read in flight ends before the server does."""
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _batch(batch: Batch) -> tuple[str, bool]:
    """A batch as `relay` renders it: (its text, whether it ends the stream)."""
    final, text = batch
    return text, final


def _shutdown() -> str:
    return sse("shutdown", json.dumps({"reconnect": True}))


async def follow(hub: EventHub, follower: Follower) -> AsyncIterator[str]:
    """The event stream of one follower: what the hub hands it, heartbeats when quiet."""
    try:
        yield "retry: 1000\n\n"
        async for text in relay(follower.queue, hub.heartbeat_s, _batch):
            yield text
    finally:
        hub.unsubscribe(follower)


@dataclass
class _Steps:
    """The followers of one job's metrics stream and the newest step the hub read."""

    last: int
    queues: set[asyncio.Queue[tuple[Any, ...]]] = field(default_factory=set)


class MetricsHub(FanOut[_Steps]):
    """Per-process fan-out of recorded steps to every metrics stream (`GET /jobs/{id}/metrics`
    as SSE, one per open job page): one poll per tick for every followed job."""

    backlog = MAX_BACKLOG * 10
    what = "metrics poll"

    async def subscribe(self, job_id: str) -> asyncio.Queue[tuple[Any, ...]]:
        """A queue of `("step", step, view)`, `("reset", newest)`, `("end", state)` or
        `("shutdown",)`; a follower more than `backlog` behind gets `shutdown`."""

        async def new_channel() -> _Steps:
            return _Steps(last=await self.run(lambda s: live.newest_step(s, job_id=job_id)))

        return await self._join(job_id, new_channel)

    async def close(self) -> None:
        self.drain()
        await _stop(self._task)

    async def poll_once(self) -> None:
        cursors = {job_id: c.last for job_id, c in self.channels.items()}
        if not cursors:
            return
        states, steps, resets = await self.run(lambda s: live.steps_poll(s, cursors=cursors))
        self.polls += 1
        for job_id, channel in list(self.channels.items()):
            if job_id not in cursors:
                continue
            if job_id in resets:
                channel.last = resets[job_id]
                self._publish(channel, ("reset", channel.last))
            for view in steps.get(job_id, []):
                if view["step"] > channel.last:
                    channel.last = view["step"]
                    self._publish(channel, ("step", view["step"], view))
            if states.get(job_id) in ENDED or states.get(job_id) == "gone":
                if not steps.get(job_id):  # ended and nothing more to read
                    self._publish(channel, ("end", states[job_id]))
                    self.channels.pop(job_id, None)


async def follow_steps(hub: MetricsHub, job_id: str, after: int) -> AsyncIterator[str]:
    """One metrics stream: the steps after `after` (caught up, then as the hub reads them),
    `reset` when a requeue went back, `end` with the final state."""
    queue = await hub.subscribe(job_id)
    try:
        # Subscribed first, then caught up: a step is in the catch-up, the queue or both
        # (dropped by number), never in neither.
        yield "retry: 1000\n\n"
        sent = after
        while True:
            state, steps = await hub.run(
                lambda s, a=sent: live.steps_after(s, job_id=job_id, after=a)
            )
            for view in steps:
                sent = view["step"]
                yield sse("step", json.dumps(view), sent)
            if len(steps) < live.MAX_STEPS:
                break
        if not steps:
            newest = await hub.run(lambda s: live.newest_step(s, job_id=job_id))
            if newest < sent:  # resumed past the newest: a requeue went back meanwhile
                sent = newest
                yield sse("reset", json.dumps({"step": newest}))
        if state in ENDED:
            yield sse("end", json.dumps({"state": state}))
            return

        def render(event: tuple[Any, ...]) -> tuple[str, bool]:
            nonlocal sent
            if event[0] == "step" and event[1] > sent:
                sent = event[1]
                return sse("step", json.dumps(event[2]), sent), False
            if event[0] == "reset":
                sent = event[1]
                return sse("reset", json.dumps({"step": event[1]})), False
            if event[0] == "end":
                return sse("end", json.dumps({"state": event[1]})), True
            if event[0] == "shutdown":
                return _shutdown(), True
            return "", False

        async for text in relay(queue, hub.heartbeat_s, render):
            yield text
    finally:
        hub.unsubscribe(job_id, queue)
