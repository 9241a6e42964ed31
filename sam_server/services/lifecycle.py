"""Worker-side verbs: claim, renew, record progress, finish. Every claim is a compare-and-set.

Celery delivers at least once, so each function checks the job's state, attempt and lease owner
before it writes: a duplicate or stale message changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sam_domain.compile import CompiledArtifact
from sam_domain.json_value import JsonObject
from sam_server.db.models import CompileServer, Job, JobAttempt, JobLog, JobMetric, Wafer
from sam_server.db.types import as_utc, utcnow
from sam_server.errors import InvalidTransition
from sam_server.services import history
from sam_server.services.arrays import array_files
from sam_server.services.bounds import LOG_ERROR_BYTES, cap_error, cap_json, cap_text
from sam_server.services.bulk import MAX_CHUNK_ROWS, Pace, state_in, transition_many
from sam_server.services.transitions import JobState, transition
from sam_server.states import LEASED, RunEnd


@dataclass(frozen=True)
class Claim:
    """What a worker needs to run its claimed piece of a job."""

    job_id: str
    attempt: int
    spec: dict[str, Any]
    files: dict[str, str]
    rows: int
    cols: int
    region: tuple[int, int, int, int] | None
    compile_key: str | None
    time_limit_s: int
    total_steps: int
    tenant_id: int | None = None  # the compile cache's namespace: tenants never share entries
    artifact_digest: str | None = None  # what the compile recorded; checked before a run
    checkpoint_step: int | None = None  # the checkpoint to resume from (None: step 0)
    checkpoint_sha256: str | None = None  # its hash as recorded when it was written
    tenant: str = ""  # the tenant's name (its space in the artifact store)


def _claim_of(job: Job, session: Session) -> Claim:
    region = None
    if job.wafer_id is not None:
        region = (
            job.region_row or 0,
            job.region_col or 0,
            job.region_rows or 0,
            job.region_cols or 0,
        )
    return Claim(
        job.id,
        job.attempts,
        job.spec,
        array_files(session, job.array_job_id) if job.array_job_id else job.files,
        job.req_rows,
        job.req_cols,
        region,
        job.compile_key,
        job.time_limit_s,
        job.total_steps,
        job.tenant_id,
        _artifact_digest(job.compile_summary),
        job.checkpoint_step,
        job.checkpoint_sha256,
        job.tenant.name,
    )


def _take_lease(session: Session, job: Job, owner: str, lease_s: float) -> bool:
    """Compare-and-set the lease: succeeds only if nobody else holds a live lease."""
    now = utcnow()
    expires = as_utc(job.lease_expires_at)
    if job.lease_owner not in (None, owner) and expires is not None and expires > now:
        return False
    result = session.execute(
        update(Job)
        .where(Job.id == job.id, Job.version == job.version)
        .values(
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=lease_s),
            version=job.version + 1,
            updated_at=now,
        )
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    job.version += 1
    job.lease_owner = owner
    return True


def claim_compile(session: Session, *, job_id: str, owner: str, lease_s: float) -> Claim | None:
    """Claim a `compiling` job for a compile server, or None if it is not ours to compile."""
    job = session.get(Job, job_id, with_for_update={"of": Job})
    if job is None or job.state != JobState.COMPILING.value:
        return None
    if not _take_lease(session, job, owner, lease_s):
        return None
    return _claim_of(job, session)


def claim_run(
    session: Session, *, job_id: str, attempt: int, wafer_id: str, owner: str, lease_s: float
) -> Claim | None:
    """Claim a placed job for the wafer worker of `wafer_id` (this attempt only)."""
    job = session.get(Job, job_id, with_for_update={"of": Job})
    if job is None or job.state not in (JobState.RUNNING.value, JobState.CANCELLING.value):
        return None
    if job.wafer_id != wafer_id or job.attempts != attempt:
        return None
    if not _take_lease(session, job, owner, lease_s):
        return None
    row = _current_attempt(session, job)
    if row is not None and row.started_at is None:
        row.started_at = utcnow()
        row.worker = owner
    return _claim_of(job, session)


def _current_attempt(session: Session, job: Job) -> JobAttempt | None:
    return session.execute(
        select(JobAttempt).where(JobAttempt.job_id == job.id, JobAttempt.attempt == job.attempts)
    ).scalar_one_or_none()


def renew_lease(
    session: Session, *, job_id: str, owner: str, lease_s: float
) -> dict[str, bool] | None:
    """Extend our lease; None if we lost it (the worker must stop at once).

    Returns the job's stop flags so that the worker learns about cancel/preempt requests.
    """
    now = utcnow()
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.lease_owner == owner,
            Job.state.in_(LEASED),
        )
        .values(lease_expires_at=now + timedelta(seconds=lease_s))
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return None
    return read_flags(session, job_id=job_id, owner=owner)


def read_flags(session: Session, *, job_id: str, owner: str) -> dict[str, bool] | None:
    """The job's stop flags, or None if `owner` no longer holds it."""
    row = session.execute(
        select(Job.cancel_requested, Job.preempt_requested, Job.state, Job.lease_owner).where(
            Job.id == job_id
        )
    ).one_or_none()
    if row is None or row[3] != owner:
        return None
    return {"cancel": bool(row[0]) or row[2] == JobState.CANCELLING, "preempt": bool(row[1])}


def _owned(session: Session, job_id: str, owner: str) -> Job | None:
    job = session.get(Job, job_id, with_for_update={"of": Job})
    if job is None or job.lease_owner != owner:
        return None
    return job


def _artifact_digest(summary: JsonObject | None) -> str | None:
    """The artifact's digest its compile recorded (`CompileSummary.artifact_sha256`)."""
    digest = (summary or {}).get("artifact_sha256")
    return digest if isinstance(digest, str) else None


@dataclass(frozen=True)
class StoredCompile:
    """A compile as the database keeps it, which a job reusing its artifact copies: its summary
    is the stored JSON, which may be `cap_json`'s stand-in rather than a `CompileSummary`."""

    cache_key: str
    cache_hit: bool
    seconds: float
    summary: Mapping[str, object] | None


def finish_compile(
    session: Session,
    *,
    job_id: str,
    owner: str,
    result: CompiledArtifact | None,
    error: tuple[str, str] | None = None,
) -> str | None:
    """Record a compile's outcome; the job goes on to `pending` (or ends). Returns the new state."""
    job = _owned(session, job_id, owner)
    if job is None or job.state != JobState.COMPILING.value:
        return None
    error = cap_error(error)
    if error is not None:
        job.error_kind, job.error_message = error
        transition(session, job, JobState.FAILED, reason=f"{error[0]}: {error[1][:200]}")
        # The log keeps a short copy: the full (capped) text is stored once, in the job's error.
        short = cap_text(error[1], LOG_ERROR_BYTES)
        log(session, job_id, f"compile failed ({error[0]}): {short}", level="ERROR")
        return job.state
    assert result is not None
    _record_compile(session, job, result)
    return job.state


def _record_compile(session: Session, job: Job, result: CompiledArtifact | StoredCompile) -> None:
    job.compile_key = result.cache_key
    job.compile_cache_hit = result.cache_hit
    job.compile_seconds = result.seconds
    job.compile_summary = cap_json(result.summary)
    hit = "cache hit" if job.compile_cache_hit else "compiled"
    log(session, job.id, f"{hit} in {job.compile_seconds:.3f}s (artifact {job.compile_key[:16]})")
    if job.mode in ("compile_only", "validate_only"):
        transition(session, job, JobState.SUCCEEDED, reason=f"{job.mode} done")
    else:
        job.eligible_at = utcnow()
        job.reason = "Resources"
        transition(session, job, JobState.PENDING, reason=hit)


def reuse_artifact(
    session: Session, job: Job, *, artifact: str, summary: Mapping[str, object] | None
) -> None:
    """A queued job whose compile inputs match an earlier successful compile takes its
    content-addressed artifact at once, with no trip through a compile server, and a copy of
    the summary stored with that compile (as stored: it may be `cap_json`'s stand-in)."""
    transition(session, job, JobState.COMPILING, reason="identical compile already done")
    _record_compile(session, job, StoredCompile(artifact, True, 0.0, summary))


def reuse_artifacts(
    session: Session, job_ids: list[str], *, artifact: str, summary: Mapping[str, object] | None
) -> list[str]:
    """`reuse_artifact` for many queued jobs of one compile hash, set-based in the caller's
    transaction; returns the ids that took it (a job no longer queued, or being cancelled, is
    left). Compile-only and validate-only jobs go the one-job way (they end here)."""
    rows = session.execute(
        select(Job.id, Job.mode).where(
            Job.id.in_(job_ids),
            state_in([JobState.QUEUED.value]),
            Job.cancel_requested.is_(False),
        )
    ).all()
    ending = [r.id for r in rows if r.mode in ("compile_only", "validate_only")]
    for job_id in ending:
        job = session.get(Job, job_id)
        if job is not None:
            reuse_artifact(session, job, artifact=artifact, summary=summary)
    training = [r.id for r in rows if r.mode not in ("compile_only", "validate_only")]
    now = utcnow()
    done = transition_many(
        session,
        training,
        {JobState.QUEUED: JobState.PENDING},
        pace=Pace(chunk_rows=MAX_CHUNK_ROWS, commit=False),
        reason="cache hit",
        via=(JobState.COMPILING, "identical compile already done"),
        values={
            "compile_key": artifact,
            "compile_cache_hit": True,
            "compile_seconds": 0.0,
            "compile_summary": cap_json(summary),
            "eligible_at": now,
            "reason": "Resources",
        },
        log_line=f"cache hit in 0.000s (artifact {artifact[:16]})",
        where=[Job.cancel_requested.is_(False)],
    )
    return ending + done.ids


def forget_artifact(session: Session, *, compile_key: str) -> int:
    """A worker found artifact `compile_key` corrupt: no queued job may reuse it any more (the
    scheduler reuses artifacts by `compile_hash`), so the next submit of those inputs compiles
    afresh. Returns how many jobs pointed at it."""
    result = session.execute(
        update(Job).where(Job.compile_key == compile_key).values(compile_hash=None)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def record_steps(
    session: Session,
    *,
    job_id: str,
    owner: str,
    attempt: int,
    steps: list[dict[str, Any]],
    lines: list[tuple[str, str]],
    keep_recent: int = 200,
    chunk_steps: int = 500,
) -> bool:
    """Store per-step metrics and log lines; False if the lease is no longer ours.

    Steps older than the newest `keep_recent` (or so) are packed `chunk_steps` to a row."""
    job = session.get(Job, job_id)
    if job is None or job.lease_owner != owner or job.attempts != attempt:
        return False
    if steps:
        first = min(s["step"] for s in steps)
        history.drop_metrics_from(session, job_id=job_id, first=first)
        session.add_all(
            JobMetric(
                job_id=job_id,
                step=s["step"],
                loss=finite_or_none(s["loss"]),
                loss_nonfinite=nonfinite_kind(s["loss"]),
                sim_cycles=s["sim_cycles"],
                samples_per_sec=s["samples_per_sec"],
                attempt=attempt,
                accuracy=s.get("accuracy"),
            )
            for s in steps
        )
        last = steps[-1]
        job.progress_step = last["step"] + 1
        job.progress_loss = finite_or_none(last["loss"])
    for level, line in lines:
        session.add(JobLog(job_id=job_id, level=level[:8], line=cap_text(line)))
    if steps:  # keep the row count bounded: older steps go into packed chunks
        session.flush()
        history.compact_metrics(session, job_id=job_id, recent=keep_recent, chunk=chunk_steps)
    return True


def finite_or_none(value: float | None) -> float | None:
    """A loss as the database keeps it: NaN and infinities are stored as null (SQLite turns NaN
    into NULL, and JSON has neither), with `nonfinite_kind` kept beside it."""
    return value if value is not None and math.isfinite(value) else None


def nonfinite_kind(value: float | None) -> str | None:
    """ "nan", "inf" or "-inf" for a non-finite loss, else None."""
    if value is None or math.isfinite(value):
        return None
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def note_checkpoint(
    session: Session, *, job_id: str, owner: str, step: int, sha256: str | None = None
) -> None:
    """Remember the newest checkpoint and its hash, so a requeued attempt resumes from it (and
    from nothing else: files that appear in the checkpoint folder later are never trusted)."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.lease_owner == owner)
        .values(checkpoint_step=step, checkpoint_sha256=sha256)
    )


def finish_run(
    session: Session,
    *,
    job_id: str,
    owner: str,
    attempt: int,
    outcome: RunEnd | str,
    error: tuple[str, str] | None = None,
    report: dict[str, Any] | None = None,
) -> str | None:
    """End our attempt: succeeded / cancelled / preempted (back to pending) / failed (`error`:
    its kind and message)."""
    end = RunEnd(outcome)  # a name outside RunEnd is a ValueError, not a silent failure
    job = _owned(session, job_id, owner)
    if job is None or job.attempts != attempt:
        return None
    row = _current_attempt(session, job)
    if row is not None:
        row.ended_at = utcnow()
        row.outcome = end.value
    if report is not None:
        job.report = report
    try:
        _apply_outcome(session, job, end, error)
    except InvalidTransition:
        return None
    return job.state


def _apply_outcome(session: Session, job: Job, end: RunEnd, error: tuple[str, str] | None) -> None:
    if end is RunEnd.SUCCEEDED:
        job.reason = None
        transition(session, job, JobState.SUCCEEDED, reason="all steps done")
    elif end is RunEnd.CANCELLED:
        if job.state == JobState.RUNNING.value:
            transition(session, job, JobState.CANCELLING, reason="stop requested")
        job.reason = None
        transition(session, job, JobState.CANCELLED, reason="stopped at a step boundary")
    elif end is RunEnd.PREEMPTED:
        job.preempt_requested = False
        job.preempt_count += 1
        job.last_preempted_at = utcnow()
        job.reason = "Preempted"
        transition(session, job, JobState.PENDING, reason="preempted; resumes from its checkpoint")
    else:
        kind, message = cap_error(error) or ("internal", "the run failed")
        job.error_kind, job.error_message = kind, message
        transition(session, job, JobState.FAILED, reason=f"{kind}: {message[:200]}")


def log(session: Session, job_id: str, line: str, *, level: str = "INFO") -> None:
    """Append one line to a job's log (capped: a line may carry a tenant's text)."""
    session.add(JobLog(job_id=job_id, level=level, line=cap_text(line)))


def heartbeat_wafer(
    session: Session, *, wafer_id: str, worker: str, arch: str, rows: int, cols: int
) -> None:
    """Mark the wafer online under this worker (registering it if the cluster file lacked it)."""
    wafer = session.get(Wafer, wafer_id)
    if wafer is None:
        wafer = Wafer(id=wafer_id, arch=arch, rows=rows, cols=cols)
        session.add(wafer)
    wafer.state, wafer.worker, wafer.heartbeat_at = "online", worker, utcnow()


def heartbeat_compile_server(
    session: Session,
    *,
    server_id: str,
    busy: int,
    compiles: int,
    cache_hits: int,
    slots: int = 1,
) -> None:
    """A compile server's liveness, compile slots and counters."""
    row = session.get(CompileServer, server_id)
    if row is None:
        row = CompileServer(id=server_id)
        session.add(row)
    row.heartbeat_at, row.busy, row.compiles, row.cache_hits = utcnow(), busy, compiles, cache_hits
    row.slots = slots
