"""Live log streaming on the event loop: one database poll per tick for every followed job,
fanned out to all of each job's followers (Server-Sent Events with ids, resume, heartbeats and a
bounded drain on shutdown).

A follower never holds a worker thread or a database connection while it waits: it awaits an
in-memory queue that the hub's single poller fills.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio

from sam_server.services import logfeed
from sam_server.services.logfeed import ENDED as ENDED  # re-exported: api/live.py ends with it

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger("sam.server.stream")

FULL_POLL_EVERY = 4  # ticks between polls that read every followed job in full
MAX_BACKLOG = 10_000  # events queued for one slow follower before it is told to reconnect


Event = tuple[Any, ...]
KEEP_ALIVE = ": keep-alive\n\n"  # an SSE comment: the client ignores it


class Followed(Protocol):
    """What a hub keeps per followed job: at least the queues of its followers."""

    queues: set[asyncio.Queue[Event]]


C = TypeVar("C", bound=Followed)


class FanOut(Generic[C]):
    """A per-process hub: one poller for every followed job, its events fanned out to each
    job's followers (a queue per follower). Subclasses read the database (`poll_once`)."""

    backlog = MAX_BACKLOG
    """Events queued for one follower before it is told to reconnect (`shutdown`)."""
    what = "poll"
    """What a failed poll is called in the log."""

    def __init__(
        self, sessions: sessionmaker[Session], *, poll_s: float = 0.5, heartbeat_s: float = 15.0
    ) -> None:
        self.sessions = sessions
        self.poll_s, self.heartbeat_s = poll_s, heartbeat_s
        self.channels: dict[str, C] = {}
        self.draining = False
        self.polls = 0  # database polls made, for tests and the benchmark
        self._task: asyncio.Task[None] | None = None
        # Polls get their own thread: they never queue behind (or block) ordinary requests.
        self._limiter = anyio.CapacityLimiter(1)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(session, *args) in the hub's own thread, with a session of its own."""

        def work() -> Any:
            with self.sessions() as session:
                return fn(session, *args)

        return await anyio.to_thread.run_sync(work, limiter=self._limiter)

    async def _join(
        self, job_id: str, new_channel: Callable[[], Awaitable[C]]
    ) -> asyncio.Queue[Event]:
        """A new follower's queue on `job_id`'s channel (made by `new_channel` for the first)."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        channel = self.channels.get(job_id)
        if channel is None:
            made = await new_channel()
            channel = self.channels.setdefault(job_id, made)
        channel.queues.add(queue)
        if self.draining:
            queue.put_nowait(("shutdown",))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll_forever())
        return queue

    def unsubscribe(self, job_id: str, queue: asyncio.Queue[Event]) -> None:
        """Forget a follower; the job stops being polled when it has none left."""
        channel = self.channels.get(job_id)
        if channel is None:
            return
        channel.queues.discard(queue)
        if not channel.queues:
            del self.channels[job_id]

    def drain(self) -> None:
        """Tell every follower the server is going away (they end their streams at once)."""
        self.draining = True
        for channel in self.channels.values():
            for queue in channel.queues:
                queue.put_nowait(("shutdown",))

    async def _poll_forever(self) -> None:
        while self.channels:
            try:
                await self.poll_once()
            except Exception:  # noqa: BLE001 - a database hiccup must not end every stream
                log.exception("%s failed; retrying", self.what)
            await asyncio.sleep(self.poll_s)

    async def poll_once(self) -> None:
        """One database read for every followed job; deliver what is new."""
        raise NotImplementedError

    def _publish(self, channel: C, event: Event) -> None:
        for queue in list(channel.queues):
            if queue.qsize() >= self.backlog:  # too slow: make it resume from where it was
                channel.queues.discard(queue)
                queue.put_nowait(("shutdown",))
            else:
                queue.put_nowait(event)


@dataclass
class _Channel:
    """The followers of one job and how far the hub has read its log."""

    last_id: int
    queues: set[asyncio.Queue[Event]] = field(default_factory=set)


class LogHub(FanOut[_Channel]):
    """Per-process fan-out of job log lines to every follower of every job."""

    what = "log poll"

    def __init__(
        self, sessions: sessionmaker[Session], *, poll_s: float = 0.5, heartbeat_s: float = 15.0
    ) -> None:
        super().__init__(sessions, poll_s=poll_s, heartbeat_s=heartbeat_s)
        self._seen_max = 0  # the newest log id of all jobs at the last poll
        self.gauge: Any = None  # a prometheus Gauge of open followers, when the app sets one

    @property
    def followers(self) -> int:
        """Followers connected to this process now."""
        return sum(len(c.queues) for c in self.channels.values())

    async def subscribe(self, job_id: str) -> asyncio.Queue[Event]:
        """A queue that receives `("log", id, text)`, `("end", id, state)` or `("shutdown",)`."""

        async def new_channel() -> _Channel:
            return _Channel(last_id=await self.run(logfeed.max_log_id, job_id))

        queue = await self._join(job_id, new_channel)
        if self.gauge is not None:
            self.gauge.inc()
        return queue

    def unsubscribe(self, job_id: str, queue: asyncio.Queue[Event]) -> None:
        """Forget a follower; the job stops being polled when it has none left."""
        if self.gauge is not None:
            self.gauge.dec()
        super().unsubscribe(job_id, queue)

    async def close(self) -> None:
        """Stop the poller."""
        self.drain()
        if self._task is not None:
            self._task.cancel()

    async def poll_once(self) -> None:
        """One database read for every followed job; deliver new lines and ends."""
        cursors = {job_id: c.last_id for job_id, c in self.channels.items()}
        if not cursors:
            return
        full = self.polls % FULL_POLL_EVERY == 0
        states, rows, self._seen_max = await self.run(
            logfeed.read_new, cursors, self._seen_max, full
        )
        self.polls += 1
        for job_id, lines in rows.items():
            channel = self.channels.get(job_id)
            if channel is None:
                continue
            for line_id, text in lines:
                if line_id > channel.last_id:
                    channel.last_id = line_id
                    self._publish(channel, ("log", line_id, text))
        for job_id, state in states.items():
            channel = self.channels.get(job_id)
            if channel is not None and state in ENDED:
                self._publish(channel, ("end", channel.last_id, state))
                del self.channels[job_id]


def sse(event: str, data: str, event_id: int | None = None) -> str:
    """One Server-Sent Event (a data line per line of `data`)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = "".join(f"data: {part}\n" for part in data.split("\n"))
    return f"{head}event: {event}\n{body}\n"


E = TypeVar("E")


async def relay(
    queue: asyncio.Queue[E], heartbeat_s: float, render: Callable[[E], tuple[str, bool]]
) -> AsyncIterator[str]:
    """The wait loop of every live stream: each event of `queue` as `render` writes it (its SSE
    text, "" for none, and whether it ends the stream), and a keep-alive comment after each
    `heartbeat_s` of quiet (it keeps proxies and idle timeouts from closing the stream)."""
    while True:
        try:
            with anyio.fail_after(heartbeat_s):
                event = await queue.get()
        except TimeoutError:
            yield KEEP_ALIVE
            continue
        text, last = render(event)
        if text:
            yield text
        if last:
            return


async def follow(hub: LogHub, job_id: str, after_id: int) -> AsyncIterator[str]:
    """The event stream of one follower: lines after `after_id`, then `end` (or `shutdown`)."""
    queue = await hub.subscribe(job_id)
    try:
        # Subscribed first, then caught up: a line is in the catch-up, the queue, or both
        # (dropped by id), never in neither.
        state, lines = await hub.run(logfeed.catch_up, job_id, after_id)
        sent = after_id
        yield "retry: 1000\n\n"
        for line_id, text in lines:
            sent = line_id
            yield sse("log", text, line_id)
        if state in ENDED:
            yield sse("end", json.dumps({"state": state}), sent)
            return

        def render(event: Event) -> tuple[str, bool]:
            nonlocal sent
            if event[0] == "log" and event[1] > sent:
                sent = event[1]
                return sse("log", event[2], sent), False
            if event[0] == "end":
                return sse("end", json.dumps({"state": event[2]}), max(sent, event[1])), True
            if event[0] == "shutdown":
                return sse("shutdown", json.dumps({"reconnect": True}), sent), True
            return "", False

        async for text in relay(queue, hub.heartbeat_s, render):
            yield text
    finally:
        hub.unsubscribe(job_id, queue)


def install_drain_on_signal(*hubs: Any) -> None:
    """Chain SIGTERM/SIGINT so that every hub's followers get a final `shutdown` event at once
    and the server's graceful shutdown (which waits for open responses) ends within moments."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous = signal.getsignal(sig)
        except ValueError:  # not the main thread (a test server): nothing to chain
            return

        def handler(num: int, frame: object, previous: object = previous) -> None:
            for hub in hubs:
                loop.call_soon_threadsafe(hub.drain)
            if callable(previous):
                previous(num, frame)

        try:
            signal.signal(sig, handler)
        except ValueError:
            return
