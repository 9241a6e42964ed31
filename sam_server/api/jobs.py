"""Routes for jobs: submit, list, get, cancel, logs (text or live SSE), metrics, explain, report."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse

from sam_server.api import live
from sam_server.api.deps import PrincipalDep, SessionDep, principal_from_header
from sam_server.api.stream import follow
from sam_server.errors import BadRequest, NotFound
from sam_server.schemas.jobs import ArraySubmitted, DryRun, JobRead, JobSubmit, job_view
from sam_server.schemas.listing import ArraysMode, JobListPage, JobRows, View
from sam_server.schemas.numbers import INT64_MAX
from sam_server.services import control, history, observe
from sam_server.services import jobs as svc
from sam_server.services.array_control import BulkOutcome
from sam_server.services.bulk import Pace
from sam_server.services.listing import Listing, list_page
from sam_server.services.submit import submit_job

router = APIRouter(prefix="/api/v1", tags=["jobs"])
FULL_PAGE_MAX = 500  # job objects per page of GET /jobs (slim rows: SAM_LISTING_MAX_ROWS)
MAX_LISTED_IDS = 500  # `job` values of one GET /jobs


@router.post(
    "/jobs",
    status_code=status.HTTP_201_CREATED,
    response_model=JobRead | ArraySubmitted | DryRun,
    responses={200: {"description": "an Idempotency-Key replay, or a dry run"}},
)
async def submit(
    body: JobSubmit,
    request: Request,
    dry_run: bool = False,
    idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Any:
    """Submit a job; it starts `queued`. `?dry_run=true` only validates."""
    # The hot path of the API: authentication, validation and the INSERTs run in ONE worker
    # thread (sync dependencies would cost a thread hop each), and only a few submits at once
    # (SAM_SUBMIT_CONCURRENCY): more threads than that only queue for the GIL.
    state = request.app.state
    if state.submit_limiter is None:
        state.submit_limiter = anyio.CapacityLimiter(state.settings.api.submit_concurrency)
    return await anyio.to_thread.run_sync(
        _submit,
        request,
        body,
        dry_run,
        idempotency_key,
        authorization,
        limiter=state.submit_limiter,
    )


def _submit(
    request: Request,
    body: JobSubmit,
    dry_run: bool,
    idempotency_key: str | None,
    authorization: str | None,
) -> Response:
    with request.app.state.sessions() as session:
        principal = principal_from_header(session, authorization)
        if dry_run:
            return JSONResponse(
                svc.dry_run(spec=body.spec, spec_yaml=body.spec_yaml, files=body.files)
            )
        request.app.state.submit_buckets.take(principal.tenant or principal.name)
        result = submit_job(
            session,
            principal=principal,
            spec=body.spec,
            spec_yaml=body.spec_yaml,
            files=body.files,
            idempotency_key=idempotency_key,
            settings=request.app.state.settings,
        )
        session.commit()
    request.app.state.submits_total.inc()
    # A ready JSONResponse skips re-validating our own output against the response model
    # (documented above for OpenAPI).
    return JSONResponse(
        result.view,
        status_code=201 if result.created else 200,
        headers={"Location": f"/api/v1/jobs/{result.job_id}"},
    )


@router.get("/jobs", response_model=JobListPage | JobRows)
def list_jobs(
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
    state: Annotated[list[str] | None, Query()] = None,
    user: str | None = None,
    tenant: str | None = None,
    job: Annotated[list[str] | None, Query(max_length=MAX_LISTED_IDS)] = None,
    arrays: ArraysMode = "collapse",
    view: View = "full",
    limit: Annotated[int, Query(ge=1)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """Jobs newest first, a page at a time; follow `next_cursor` until it is null. An array's
    waiting tasks are one row unless `arrays=expand`; `job` (repeatable): only these jobs or
    these arrays' tasks; `view=slim`: `{columns, rows}`, pages of up to SAM_LISTING_MAX_ROWS."""
    most = FULL_PAGE_MAX if view == "full" else request.app.state.settings.api.listing_max_rows
    if limit > most:
        hint = "" if view == "slim" else "; view=slim pages are larger"
        raise RequestValidationError(
            [{"loc": ("query", "limit"), "msg": f"at most {most}{hint}", "type": "too_large"}]
        )
    want = Listing(state or (), user, tenant, job or (), arrays, limit, cursor)
    return JSONResponse(list_page(session, principal, want, view))


@router.get("/jobs/{job_id}", response_model=JobRead)
def get_job(job_id: str, session: SessionDep, principal: PrincipalDep) -> Response:
    """One job (404 for an id of another tenant)."""
    return JSONResponse(job_view(svc.get_job(session, principal=principal, job_id=job_id)))


@router.post("/jobs/{job_id}/cancel", status_code=status.HTTP_202_ACCEPTED, response_model=JobRead)
def cancel(job_id: str, request: Request, session: SessionDep, principal: PrincipalDep) -> Response:
    """Cancel; 409 if the job had already ended. An array's id cancels every unfinished task
    and answers `{id, changed, unchanged, changed_count, unchanged_count}`."""
    pace = Pace.of(request.app.state.settings, session)
    outcome = control.cancel(session, principal=principal, job_id=job_id, pace=pace)
    if isinstance(outcome, BulkOutcome):
        return JSONResponse(outcome.view(), status_code=status.HTTP_202_ACCEPTED)
    body = job_view(outcome.changed[0])
    return JSONResponse(body, status_code=status.HTTP_202_ACCEPTED)


@router.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
async def logs(
    job_id: str,
    request: Request,
    tail: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    since: datetime | None = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    """The job's log (`tail`: the last N lines, `since`: lines at or after a time); with
    `Accept: text/event-stream` a live stream (every event has an `id:`; a `Last-Event-ID`
    header resumes after it) that ends when the job ends."""
    sessions = request.app.state.sessions
    if "text/event-stream" in request.headers.get("accept", ""):
        job = await anyio.to_thread.run_sync(_visible_job, sessions, authorization, job_id)
        after = _event_id(last_event_id)
        stream = follow(request.app.state.log_hub, job.id, after)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    def read() -> Response:
        with sessions() as session:
            job = svc.get_job(
                session, principal=principal_from_header(session, authorization), job_id=job_id
            )
            lines = history.log_lines(session, job=job, tail=tail, since=since)
            last = lines[-1].id if lines else history.last_log_id(session, job=job)
            text = "".join(observe.format_log(line) + "\n" for line in lines)
            notice = history.purged_notice(job)
        # The id a follower sends as Last-Event-ID to continue right after this text.
        headers = {"X-Last-Event-ID": str(last)}
        if notice is not None:  # retention deleted the log: say so rather than show nothing
            text = notice + "\n" + text
            headers["X-SAM-History-Purged"] = "true"
        return PlainTextResponse(text, headers=headers)

    return await anyio.to_thread.run_sync(read)


def _visible_job(sessions: Any, authorization: str | None, job_id: str) -> Any:
    with sessions() as session:
        principal = principal_from_header(session, authorization)
        return svc.get_job(session, principal=principal, job_id=job_id)


def _event_id(header: str | None) -> int:
    """The log line id a `Last-Event-ID` names (0: from the start)."""
    if not header:
        return 0
    try:
        event = max(0, int(header.strip()[:32]))
        if event > INT64_MAX:
            raise ValueError(header)
        return event
    except ValueError:
        raise BadRequest(
            f"Last-Event-ID {header[:40]!r} is not an event id of this stream; "
            "send the `id:` of the last event received, or omit the header"
        ) from None


@router.get("/jobs/{job_id}/metrics")
async def metrics(
    job_id: str,
    request: Request,
    last: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    every: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    """Per-step loss, simulated cycles and samples/s, step 0 first (`last`: the newest N;
    `every`: then only steps whose number is a multiple of it, and the newest); with
    `Accept: text/event-stream` a live stream of `step` events (see `sam_server.api.live`)."""
    if "text/event-stream" in request.headers.get("accept", ""):
        return await live.metrics_stream(request, job_id, authorization)

    def read() -> Response:
        with request.app.state.sessions() as session:
            principal = principal_from_header(session, authorization)
            job = svc.get_job(session, principal=principal, job_id=job_id)
            return JSONResponse(history.metrics(session, job=job, last=last, every=every))

    return await anyio.to_thread.run_sync(read)


@router.get("/jobs/{job_id}/explain")
def explain(job_id: str, session: SessionDep, principal: PrincipalDep) -> dict[str, object]:
    """Why the job is not running: every reason, its position and ETA."""
    return observe.explain(svc.get_job(session, principal=principal, job_id=job_id))


@router.get("/jobs/{job_id}/report")
def report(job_id: str, session: SessionDep, principal: PrincipalDep) -> dict[str, object]:
    """The performance report: simulated throughput, utilization and SRAM, compile summary."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    images = {}
    if job.report:
        images = {n.split(".")[0]: f"/api/v1/jobs/{job.id}/report/{n}" for n in sorted(HEATMAPS)}
    return {
        "job_id": job.id,
        "state": job.state,
        "compile": job.compile_summary,
        "run": job.report,
        "images": images,
    }


HEATMAPS = {"utilization.png", "sram.png"}


@router.get("/jobs/{job_id}/report/{name}", response_class=FileResponse)
def report_image(
    job_id: str, name: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> FileResponse:
    """A heatmap of the performance report: `utilization.png` or `sram.png` (per PE)."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    if name not in HEATMAPS:  # never build a path from user input beyond this fixed set
        raise NotFound(f"no report image {name!r}; try one of {sorted(HEATMAPS)}")
    path = request.app.state.settings.data_dir.resolve() / "reports" / job.id / name
    if not path.is_file():
        raise NotFound(f"job {job.id} has no {name} yet; reports are written when a run ends")
    return FileResponse(path, media_type="image/png")


@router.get("/queue")
def queue(
    session: SessionDep,
    principal: PrincipalDep,
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    user: str | None = None,
    tenant: str | None = None,
) -> dict[str, object]:
    """Jobs not yet running, in the order the scheduler will consider them (`limit`: the first
    N; `user`, and `tenant` for admins, narrow it as in `GET /jobs`)."""
    items = observe.queue(session, principal=principal, limit=limit, user=user, tenant=tenant)
    return {"items": items}


@router.get("/cluster")
def cluster(request: Request, session: SessionDep, principal: PrincipalDep) -> dict[str, object]:
    """Wafers, their regions and the compile servers."""
    stale = request.app.state.settings.worker.heartbeat_s * 3
    return observe.cluster(session, principal=principal, stale_s=stale)
