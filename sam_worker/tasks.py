"""Celery tasks: thin adapters that claim work through the services, run the compiler or the
simulator, and record the outcome through the services again."""

from __future__ import annotations

import logging
import time

from sqlalchemy import func, select

from sam_server.broker import COMPILE_TASK, RUN_TASK
from sam_server.config import get_settings
from sam_server.db.models import JobEvent
from sam_server.db.session import session_scope
from sam_server.db.types import as_utc, utcnow
from sam_server.services import lifecycle
from sam_server.states import JobState
from sam_worker.celery_app import app
from sam_worker.compile_server import QUEUE_WAIT, CompileOutcome, count, record
from sam_worker.identity import WORKER_ID
from sam_worker.lease import LeaseKeeper

log = logging.getLogger("sam.worker")


@app.task(name=COMPILE_TASK, acks_late=True, reject_on_worker_lost=True)
def compile_task(job_id: str) -> str:
    """Compile a `compiling` job's training step (a cache hit skips the work)."""
    from sam_worker.compile_runner import run_compile

    settings = get_settings()
    url = settings.resolved_database_url
    owner = f"compile:{WORKER_ID}"
    with session_scope(url) as session:
        claim = lifecycle.claim_compile(
            session, job_id=job_id, owner=owner, lease_s=settings.worker.lease_s
        )
        sent_at = session.execute(
            select(func.max(JobEvent.at)).where(
                JobEvent.job_id == job_id, JobEvent.to_state == JobState.COMPILING
            )
        ).scalar_one_or_none()
    if claim is None:
        return "skipped"
    sent = as_utc(sent_at)
    if sent is not None:
        QUEUE_WAIT.observe(max(0.0, (utcnow() - sent).total_seconds()))
    count("busy")
    began = time.monotonic()
    try:
        with LeaseKeeper(
            url, job_id, owner, lease_s=settings.worker.lease_s, every_s=settings.worker.heartbeat_s
        ):
            result, error = run_compile(claim, settings)
    finally:
        count("busy", -1)
    count("compiles")
    if result and result.cache_hit:
        count("cache_hits")
    outcome = (
        CompileOutcome.FAILED
        if result is None
        else CompileOutcome.CACHE_HIT
        if result.cache_hit
        else CompileOutcome.SUCCEEDED
    )
    record(outcome, time.monotonic() - began)
    with session_scope(url) as session:
        state = lifecycle.finish_compile(
            session, job_id=job_id, owner=owner, result=result, error=error
        )
    return state or "lost"


@app.task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True)
def run_task(job_id: str, attempt: int) -> str:
    """Run attempt `attempt` of a placed job on this worker's wafer."""
    from sam_worker.wafer_runner import run_on_wafer

    return run_on_wafer(job_id, attempt)
