"""Job verbs: the single-job submit's pieces, list, get, cancel. Every state change goes through
`transition`. `submit.py` puts the submit together (a single job here, an array in
`array_submit.py`, which builds on this module's pieces)."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import ColumnDefault, Table, func, insert, select, update
from sqlalchemy.orm import Session

from sam_domain.compile import CompileKey
from sam_domain.json_value import JsonValue
from sam_server.db.models import Job, JobArray, JobEvent, JobLog, Tenant, Wafer
from sam_server.db.types import utcnow
from sam_server.errors import (
    Forbidden,
    IdempotencyMismatch,
    InvalidSpec,
    InvalidTransition,
    JobNotFound,
    NeverFits,
    QuotaExceeded,
)
from sam_server.scheduling import PolicyQuota, can_ever_fit
from sam_server.schemas.job_spec import JobSpec
from sam_server.schemas.safe_yaml import load_spec_yaml
from sam_server.services.arrays import parse_array, substitute, task_values
from sam_server.services.auth import Principal
from sam_server.services.directives import split_directives
from sam_server.services.spec_check import check_files, parse_spec
from sam_server.services.transitions import TERMINAL, JobState, transition

# Core tables for the hot INSERTs (the ORM-enabled insert() costs ~2 ms more per submit).
JOBS = cast(Table, Job.__table__)
JOB_EVENTS = cast(Table, JobEvent.__table__)
# Built once and executed with a dict of values: `insert(JOBS).values(**values)` made a new
# statement, ~40 bind parameters and their cache key on every submit (a fifth of its CPU).
_INSERT_JOB = insert(JOBS)
_INSERT_EVENT = insert(JOB_EVENTS)
_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
# The constant defaults Job's columns declare (state queued, attempts 0, ...), read once: a new
# row starts from these. The callable ones (created_at, updated_at, files) `new_job_values` sets.
_COLUMN_DEFAULTS = {
    column.key: column.default.arg
    for column in JOBS.columns
    if isinstance(column.default, ColumnDefault) and column.default.is_scalar
}


def new_job_id() -> str:
    """A short random id (random, so ids say nothing about other tenants' activity).

    11 characters of a 32-letter alphabet: 55 random bits drawn in one call (one secrets.choice
    per character cost a system call each, a visible share of a submit's CPU).
    """
    bits = secrets.randbits(55)
    return "j" + "".join(_ID_ALPHABET[(bits >> (5 * i)) & 31] for i in range(11))


@dataclass
class Submitted:
    view: dict[str, Any]  # the job's API object
    created: bool  # False when an Idempotency-Key replayed an earlier submit

    @property
    def job_id(self) -> str:
        return str(self.view["id"])


def load_raw_spec(spec: Mapping[str, object] | None, spec_yaml: str | None) -> dict[str, object]:
    """The submitted spec as a mapping (from `spec` or the text `spec_yaml`), not yet checked."""
    if (spec is None) == (spec_yaml is None):
        raise InvalidSpec("send exactly one of 'spec' (a JSON object) or 'spec_yaml' (its text)")
    if spec_yaml is not None:
        try:
            spec = load_spec_yaml(spec_yaml)
        except ValueError as exc:
            raise InvalidSpec(
                str(exc), errors=[{"field": "spec_yaml", "message": str(exc)}]
            ) from exc
    if not isinstance(spec, dict):
        raise InvalidSpec("the job spec must be a mapping (job.yaml's top level)")
    return spec


def dry_run(
    *, spec: Mapping[str, object] | None, spec_yaml: str | None, files: dict[str, str]
) -> dict[str, object]:
    """The answer to `?dry_run=true` (`DryRun`): the spec as it would be stored and its region's
    shape, or `InvalidSpec` naming each problem. The sbatch-like keys (array, dependency, hold,
    kill_invalid_depend) are checked and set aside; an array's spec is checked as its first
    task sees it."""
    raw, directives = split_directives(load_raw_spec(spec, spec_yaml))
    if directives.array is not None:
        first = parse_array(directives.array).indices[0]
        raw = substitute(raw, task_values("ARRAY", first, 1))
    parsed = parse_spec(raw)
    check_files(parsed, files)
    rows, cols = parsed.resources.shape()
    stored = parsed.model_dump(mode="json", by_alias=True)
    return {"valid": True, "spec": stored, "region": {"rows": rows, "cols": cols}}


def check_can_ever_run(session: Session, principal: Principal, spec: JobSpec) -> None:
    """`NeverFits` for a region larger than every wafer or over the tenant's quota (the policy's
    `can_ever_fit` decides, so submit and scheduler agree)."""
    rows, cols = spec.resources.shape()
    q = principal.quota
    quota = PolicyQuota(q.max_pes, q.max_running_jobs, q.max_queued_jobs, q.share) if q else None
    arch = job_arch(spec.compile_options.target_device)
    why = can_ever_fit(rows, cols, wafer_shapes(session), quota, arch=arch)
    if why is not None:
        field = "spec.compile_options.target_device" if "targets" in why else "spec.resources"
        raise NeverFits(why, errors=[{"field": field, "message": why}])


def job_arch(target_device: str | None) -> str | None:
    """The wafer arch ("wse2", "wse3") of a spec's compile_options.target_device ("WSE-3")."""
    if not target_device:
        return None
    return target_device.lower().replace("-", "")


_WAFER_CACHE: dict[str, tuple[float, list[tuple[int, int, str]]]] = {}


def wafer_shapes(session: Session, ttl_s: float = 5.0) -> list[tuple[int, int, str]]:
    """(rows, cols, arch) of every registered wafer; cached briefly, since wafers change rarely
    and every submit needs them."""
    key = str(session.get_bind().engine.url)
    now = time.monotonic()
    cached = _WAFER_CACHE.get(key)
    if cached is None or now - cached[0] > ttl_s:
        query = select(Wafer.rows, Wafer.cols, Wafer.arch)
        shapes = [(w.rows, w.cols, w.arch) for w in session.execute(query).all()]
        cached = _WAFER_CACHE[key] = (now, shapes)
    return cached[1]


def request_hash(
    spec: Mapping[str, object] | None, spec_yaml: str | None, files: dict[str, str]
) -> str:
    """A stable hash of a submit body, to compare Idempotency-Key replays."""
    body = json.dumps({"spec": spec, "spec_yaml": spec_yaml, "files": files}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def check_submittable(session: Session, principal: Principal, parsed: JobSpec) -> None:
    """Who may ask for urgent, whether the job can ever run, and its init_from."""
    if parsed.priority == "urgent" and not principal.is_admin:
        raise Forbidden(
            "priority 'urgent' is for cluster admins (role admin in the 'system' tenant); "
            "use 'high'"
        )
    check_can_ever_run(session, principal, parsed)
    _check_init_from(session, principal, parsed)


def _check_init_from(session: Session, principal: Principal, spec: JobSpec) -> None:
    """run_options.init_from must name a job of the submitter's own tenant."""
    wanted = spec.run_options.init_from
    if wanted is None:
        return
    query = select(Job.id).where(Job.id == wanted.job, Job.tenant_id == principal.tenant_id)
    if session.execute(query).first() is None:
        message = (
            f"no job {wanted.job!r} in your tenant to start from; `sam queue --all` lists yours"
        )
        raise InvalidSpec(
            f"run_options.init_from.job: {message}",
            errors=[{"field": "spec.run_options.init_from.job", "message": message}],
        )


def _insert_job(session: Session, values: Mapping[str, object], principal: Principal) -> None:
    session.execute(_INSERT_JOB, values)
    session.execute(
        _INSERT_EVENT,
        {
            "job_id": values["id"],
            "at": values["created_at"],
            "from_state": None,
            "to_state": JobState.QUEUED.value,
            "reason": f"submitted by {principal.name}",
        },
    )


def new_job_values(
    principal: Principal,
    spec: JobSpec,
    files: dict[str, str],
    idempotency_key: str | None,
    digest: str,
) -> dict[str, Any]:
    """A new job's row: what the submit decides, over the defaults its columns declare (the
    columns without a default, such as the region or the error, are left out: NULL)."""
    rows, cols = spec.resources.shape()
    now = utcnow()
    return {
        **_COLUMN_DEFAULTS,
        "id": new_job_id(),
        "seq": time.time_ns(),
        "tenant_id": principal.tenant_id,
        "user_id": principal.user_id,
        "name": spec.name,
        "state": JobState.QUEUED.value,
        "priority": spec.priority,
        "mode": spec.mode,
        "spec": spec.model_dump(mode="json", by_alias=True),
        "files": files,
        "req_rows": rows,
        "req_cols": cols,
        "time_limit_s": spec.resources.time_limit,
        "total_steps": spec.run_options.total_steps if spec.mode == "train" else 0,
        "idempotency_key": idempotency_key,
        "request_hash": digest,
        "compile_hash": compile_hash(spec, files, principal.tenant_id),
        "created_at": now,
        "updated_at": now,
        "reason": "CompilePending",
    }


def compile_hash(
    spec: JobSpec,
    files: dict[str, str],
    tenant_id: int | None = None,
    *,
    dumped: Mapping[str, JsonValue] | None = None,
) -> str:
    """The digest of the job's `CompileKey` (sam_domain.compile): two jobs with the same hash
    can share one artifact. `dumped`: the spec's `model_dump(mode="json", by_alias=True)` when
    the caller has it."""
    body = spec.model_dump(mode="json", by_alias=True) if dumped is None else dumped
    return CompileKey.of(body, spec.resources.shape(), files, tenant_id).digest()


def _idempotent_replay(session: Session, principal: Principal, key: str, digest: str) -> Job | None:
    job = session.execute(
        select(Job).where(Job.tenant_id == principal.tenant_id, Job.idempotency_key == key)
    ).scalar_one_or_none()
    if job is not None and job.request_hash != digest:
        raise IdempotencyMismatch(
            f"Idempotency-Key {key!r} was used for another request body; use a new key"
        )
    return job


# Per database and tenant: (unfinished jobs counted, when). A single submit far below the
# limit trusts a count a few seconds old instead of counting 100,000 rows on every submit.
_UNFINISHED: dict[tuple[str, int | None], tuple[int, float]] = {}
COUNT_TTL_S = 5.0
# The first key of the per-tenant advisory lock that makes the count and the INSERT one
# critical section on PostgreSQL.
QUOTA_LOCK = 2029
# Arrays whose tasks are still being written (an array's submit commits chunk by chunk): their
# missing tasks count against the limit for this long after the array's row was written.
INSERTING_S = 600.0


def check_queued_quota(
    session: Session, principal: Principal, adding: int = 1, default_limit: int | None = None
) -> None:
    """429 if the tenant's unfinished jobs plus `adding` would pass its limit: the quota's
    max_queued_jobs, else `default_limit` (the max_queued_jobs setting)."""
    limit = principal.quota.max_queued_jobs if principal.quota else None
    if limit is None:
        limit = default_limit
    if limit is None:
        return
    key = (str(session.get_bind().engine.url), principal.tenant_id)
    cached = _UNFINISHED.get(key)
    now = time.monotonic()
    if adding == 1 and cached is not None and now - cached[1] < COUNT_TTL_S:
        # far below the limit: a margin for other processes' (and racing threads') submits
        if cached[0] + adding <= limit - max(1000, limit // 10):
            _UNFINISHED[key] = (cached[0] + adding, cached[1])
            return
    # The count and the INSERT after it must be one critical section per tenant, or concurrent
    # submits all pass the same count. Postgres: a per-tenant advisory lock. SQLite has no row locks
    # and its driver starts a transaction only at the first write, so a count would run outside
    # any transaction: a no-op UPDATE of the tenant opens the transaction and takes SQLite's
    # write lock first (other submits wait on busy_timeout), and the count sees every commit.
    if session.get_bind().dialect.name == "sqlite":
        session.execute(
            update(Tenant).where(Tenant.id == principal.tenant_id).values(share=Tenant.share)
        )
    else:
        # An advisory lock of its own, not the tenant row: the scheduler's cycle updates every
        # tenant row (fair-share usage) and holds it for the whole cycle, seconds with 100,000
        # queued tasks, and a submit must not wait for that.
        session.execute(select(func.pg_advisory_xact_lock(QUOTA_LOCK, principal.tenant_id or 0)))
    active = unfinished_jobs(session, principal.tenant_id)
    _UNFINISHED[key] = (active + adding, now)
    if active + adding > limit:
        more = f" and {adding} more were asked for" if adding > 1 else ""
        raise QuotaExceeded(
            f"tenant {principal.tenant!r} already has {active} unfinished jobs{more} "
            f"(max_queued_jobs={limit}); wait for some to finish or cancel some",
            errors=[
                {
                    "field": "max_queued_jobs",
                    "message": f"{active} unfinished + {adding} asked > {limit}",
                }
            ],
        )


def unfinished_jobs(session: Session, tenant_id: int | None) -> int:
    """The tenant's jobs not yet ended, with the tasks of arrays still being written."""
    active = session.execute(
        select(func.count()).where(
            Job.tenant_id == tenant_id, Job.state.not_in([s.value for s in TERMINAL])
        )
    ).scalar_one()
    since = utcnow() - timedelta(seconds=INSERTING_S)
    written = (
        select(func.count())
        .where(Job.array_job_id == JobArray.id)
        .correlate(JobArray)
        .scalar_subquery()
    )
    arrays = session.execute(
        select(JobArray.task_count, written).where(
            JobArray.tenant_id == tenant_id, JobArray.created_at >= since
        )
    ).all()
    return int(active) + sum(max(0, int(count) - int(done)) for count, done in arrays)


def get_job(session: Session, *, principal: Principal, job_id: str) -> Job:
    """The job, if the caller's tenant owns it (admins: any); otherwise 404, never 403."""
    query = select(Job).where(Job.id == job_id)
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    job = session.execute(query).scalar_one_or_none()
    if job is None:
        raise JobNotFound(f"no job {job_id!r}; `sam queue --all` lists your jobs")
    return job


def cancel_job(session: Session, *, principal: Principal, job_id: str) -> Job:
    """Cancel: a job not yet running ends at once; a running one goes to `cancelling`."""
    job = get_job(session, principal=principal, job_id=job_id)
    state = JobState(job.state)
    if state in TERMINAL:
        raise InvalidTransition(f"job {job.id} already ended ({state.value}); nothing to cancel")
    if state == JobState.CANCELLING:
        return job
    job.cancel_requested = True
    session.flush()
    by = f"cancelled by {principal.name}"
    if state == JobState.RUNNING:
        transition(session, job, JobState.CANCELLING, reason=by)
    else:
        transition(session, job, JobState.CANCELLED, reason=by)
        job.reason = None
    session.add(JobLog(job_id=job.id, line=by))
    return job
