"""Live views as Server-Sent Events: a job's steps as they are recorded, and the changes a
principal may see (state changes, running jobs' progress, the wafer map), plus a job's state
timeline. Every stream authenticates with the same bearer header as any other call, sends
`id:`s that a `Last-Event-ID` resumes from, heartbeats when quiet, and ends with `shutdown`
when the server stops (the client reconnects)."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from sam_server.api.deps import PrincipalDep, SessionDep, principal_from_header
from sam_server.api.livehub import EventHub, follow, follow_steps
from sam_server.errors import BadRequest
from sam_server.schemas.numbers import INT64_MAX
from sam_server.services import jobs as svc
from sam_server.services import live
from sam_server.services.observe import viewer_key

router = APIRouter(prefix="/api/v1", tags=["live"])

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get("/jobs/{job_id}/events")
def job_events(job_id: str, session: SessionDep, principal: PrincipalDep) -> dict[str, object]:
    """The job's state timeline: every transition, oldest first, with its time and reason."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    return {"job_id": job.id, "state": job.state, "items": live.timeline(session, job=job)}


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> StreamingResponse:
    """A live stream of what the caller may see change: `job` (a job of its tenant changed
    state; the job as listings show it plus `event`; its `id:` resumes the stream), `progress`
    (running jobs that moved: step and loss), `cluster` (the `GET /cluster` view, sent first
    and then whenever it changes). Admins see every tenant's. Every stream of the process is
    fed by one poll per tick (`sam_server.api.livehub`)."""
    sessions = request.app.state.sessions
    hub: EventHub = request.app.state.event_hub

    def start() -> str:
        with sessions() as session:
            return viewer_key(principal_from_header(session, authorization))  # 401 up front

    after = _event_id(last_event_id) if last_event_id else None  # 400 up front
    viewer = await anyio.to_thread.run_sync(start)
    follower = await hub.subscribe(viewer=viewer, authorization=authorization, after=after)
    stream = follow(hub, follower)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


async def metrics_stream(
    request: Request, job_id: str, authorization: str | None
) -> StreamingResponse:
    """`GET /jobs/{id}/metrics` with `Accept: text/event-stream`: a `step` event per recorded
    step (`id:` the step number; `Last-Event-ID` resumes after it, default: from step 0), then
    `end` with the job's final state. Every metrics stream of the process is fed by one poll
    per tick (`sam_server.api.livehub.MetricsHub`)."""
    sessions = request.app.state.sessions
    header = request.headers.get("last-event-id")
    after = _event_id(header) if header else -1

    def start() -> None:
        with sessions() as session:
            principal = principal_from_header(session, authorization)
            svc.get_job(session, principal=principal, job_id=job_id)  # 404 for other tenants

    await anyio.to_thread.run_sync(start)
    stream = follow_steps(request.app.state.metrics_hub, job_id, after)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


def _event_id(header: str | None) -> int:
    if not header:
        return 0
    try:
        event = max(-1, int(header.strip()[:32]))
        if event > INT64_MAX:
            raise ValueError(header)
        return event
    except ValueError:
        raise BadRequest(
            f"Last-Event-ID {header[:40]!r} is not an event id of this stream; "
            "send the `id:` of the last event received, or omit the header"
        ) from None
