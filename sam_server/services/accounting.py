"""Accounting that outlives the queue: one record per job (per array task), sacct's data.

`transition` writes a job's record when the job ends (and rewrites it if the job is requeued and
ends again). The record has no foreign key and copies names, so retention may purge the job row,
its logs and metrics, and `sam acct` / `sam report usage` still answer for it. Jobs not yet
ended are read live from the jobs table, so a listing shows them too (as sacct does).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobAccounting, JobAttempt, Tenant, User
from sam_server.db.types import as_utc, utcnow
from sam_server.services.auth import Principal
from sam_server.states import ENDED

TERMINAL_STATES = ENDED
MAX_RECORDS = 10_000  # one answer's cap; narrow the period or filters for more
JobAttemptLike = Any  # a JobAttempt row, or anything with its fields (the migration's rows)


def run_intervals(
    attempts: Iterable[Any], now: datetime
) -> tuple[list[list[Any]], float, JobAttemptLike | None]:
    """Each attempt that started, as `[start ISO, end ISO, PEs]`, their PE-hours, and the last.

    An attempt still open (no `ended_at`) counts up to `now`.
    """
    intervals: list[list[Any]] = []
    pe_hours = 0.0
    last = None
    for attempt in sorted(attempts, key=lambda a: a.attempt):
        last = attempt
        begin = as_utc(attempt.started_at)
        if begin is None:
            continue
        end = as_utc(attempt.ended_at) or now
        pes = int(attempt.rows) * int(attempt.cols)
        intervals.append([begin.isoformat(), end.isoformat(), pes])
        pe_hours += pes * max(0.0, (end - begin).total_seconds()) / 3600.0
    return intervals, pe_hours, last


def record_values(
    job: Any, *, tenant: str, user: str, attempts: Iterable[Any], now: datetime
) -> dict[str, Any]:
    """The accounting record's columns for `job` (a Job, or a row with the same fields)."""
    intervals, pe_hours, last = run_intervals(attempts, now)
    submit_at = as_utc(job.created_at) or now
    start_at = as_utc(job.started_at)
    end_at = as_utc(job.finished_at) or now
    return {
        "job_id": job.id,
        "array_job_id": getattr(job, "array_job_id", None),
        "array_task_id": getattr(job, "array_task_id", None),
        "tenant_id": job.tenant_id,
        "tenant": tenant,
        "user_id": job.user_id,
        "user": user,
        "name": job.name,
        "mode": job.mode,
        "priority": job.priority,
        "state": job.state,
        "exit_kind": job.error_kind,
        "submit_at": submit_at,
        "start_at": start_at,
        "end_at": end_at,
        "elapsed_s": max(0.0, (end_at - start_at).total_seconds()) if start_at else 0.0,
        "time_limit_s": job.time_limit_s,
        "wafer_id": last.wafer_id if last is not None else None,
        "region_row": last.row if last is not None else None,
        "region_col": last.col if last is not None else None,
        "region_rows": last.rows if last is not None else None,
        "region_cols": last.cols if last is not None else None,
        "pe_hours": pe_hours,
        "attempts": job.attempts,
        "intervals": intervals,
        "recorded_at": now,
    }


def _attempts_of(session: Session, job_ids: list[str]) -> dict[str, list[JobAttempt]]:
    by_job: dict[str, list[JobAttempt]] = defaultdict(list)
    if job_ids:
        rows = session.execute(select(JobAttempt).where(JobAttempt.job_id.in_(job_ids))).scalars()
        for row in rows:
            by_job[row.job_id].append(row)
    return by_job


def record_job_end(session: Session, job: Job) -> JobAccounting:
    """Write (or rewrite, after a requeue) the accounting record of a job that just ended."""
    session.flush()  # the attempt's ended_at, set just before the transition
    values = record_values(
        job,
        tenant=job.tenant.name,
        user=job.user.name,
        attempts=_attempts_of(session, [job.id])[job.id],
        now=utcnow(),
    )
    record = session.get(JobAccounting, job.id)
    if record is None:
        record = JobAccounting(**values)
        session.add(record)
    else:
        for key, value in values.items():
            setattr(record, key, value)
    return record


def record_view(values: Mapping[str, Any]) -> dict[str, object]:
    """The API's accounting object (AcctRecord) from a record's columns."""
    region = None
    if values.get("wafer_id") is not None:
        region = {
            "wafer": values["wafer_id"],
            "row": values["region_row"],
            "col": values["region_col"],
            "rows": values["region_rows"],
            "cols": values["region_cols"],
        }
    times = {k: as_utc(values.get(k)) for k in ("submit_at", "start_at", "end_at")}
    return {
        "job_id": values["job_id"],
        "array_job_id": values.get("array_job_id"),
        "array_task_id": values.get("array_task_id"),
        "tenant": values["tenant"],
        "user": values["user"],
        "name": values["name"],
        "mode": values["mode"],
        "priority": values["priority"],
        "state": values["state"],
        "exit_kind": values.get("exit_kind"),
        "submit_at": times["submit_at"],
        "start_at": times["start_at"],
        "end_at": times["end_at"] if values["state"] in TERMINAL_STATES else None,
        "elapsed_s": round(float(values["elapsed_s"]), 3),
        "time_limit_s": values["time_limit_s"],
        "wafer": values.get("wafer_id"),
        "region": region,
        "pe_hours": round(float(values["pe_hours"]), 6),
        "attempts": values["attempts"],
    }


def _columns(record: JobAccounting) -> dict[str, Any]:
    return {c.key: getattr(record, c.key) for c in JobAccounting.__table__.columns}


def list_records(
    session: Session,
    *,
    principal: Principal,
    start: datetime,
    end: datetime,
    states: list[str] | None = None,
    user: str | None = None,
    tenant: str | None = None,
    job_ids: list[str] | None = None,
) -> list[dict[str, object]]:
    """Jobs that existed during [start, end] (submitted before `end`, not ended before `start`),
    oldest submit first: ended jobs from their records, the others live from the jobs table.

    A tenant's principal sees its own tenant only; the cluster admin every tenant (or `tenant`).
    """
    now = utcnow()
    query = select(JobAccounting).where(
        JobAccounting.submit_at <= end, JobAccounting.end_at >= start
    )
    live_query = select(Job).where(Job.state.not_in(TERMINAL_STATES), Job.created_at <= end)
    if not principal.is_admin:
        query = query.where(JobAccounting.tenant_id == principal.tenant_id)
        live_query = live_query.where(Job.tenant_id == principal.tenant_id)
    elif tenant:
        query = query.where(JobAccounting.tenant == tenant)
        live_query = live_query.join(Tenant, Job.tenant_id == Tenant.id).where(
            Tenant.name == tenant
        )
    if user:
        query = query.where(JobAccounting.user == user)
        live_query = live_query.join(User, Job.user_id == User.id).where(User.name == user)
    if job_ids:
        query = query.where(
            or_(JobAccounting.job_id.in_(job_ids), JobAccounting.array_job_id.in_(job_ids))
        )
        live_query = live_query.where(Job.id.in_(job_ids))
    if states:
        query = query.where(JobAccounting.state.in_(states))
        live_query = live_query.where(Job.state.in_(states))
    records = {
        r.job_id: _columns(r)
        for r in session.execute(query.order_by(JobAccounting.submit_at).limit(MAX_RECORDS))
        .scalars()
        .all()
    }
    live = list(session.execute(live_query.limit(MAX_RECORDS)).scalars())
    attempts = _attempts_of(session, [job.id for job in live])
    for job in live:  # a requeued job's old record gives way to the live job
        records[job.id] = record_values(
            job, tenant=job.tenant.name, user=job.user.name, attempts=attempts[job.id], now=now
        )
    ordered = sorted(records.values(), key=lambda v: (as_utc(v["submit_at"]), v["job_id"]))
    return [record_view(v) for v in ordered[:MAX_RECORDS]]


def usage_report(
    session: Session,
    *,
    principal: Principal,
    start: datetime,
    end: datetime,
    tenant: str | None = None,
) -> dict[str, object]:
    """PE-hours per tenant and per user of the jobs that ran during [start, end] (sreport's
    AccountUtilizationByUser): each run is clipped to the period, so a month's report counts
    only the part of a long job inside that month. Ended jobs only (their accounting records)."""
    query = select(JobAccounting).where(
        JobAccounting.start_at.is_not(None),
        JobAccounting.start_at <= end,
        JobAccounting.end_at >= start,
    )
    if not principal.is_admin:
        query = query.where(JobAccounting.tenant_id == principal.tenant_id)
    elif tenant:
        query = query.where(JobAccounting.tenant == tenant)
    per_user: dict[tuple[str, str], dict[str, Any]] = {}
    for record in session.execute(query).scalars():
        hours = clipped_pe_hours(record.intervals or [], start, end)
        row = per_user.setdefault(
            (record.tenant, record.user),
            {"tenant": record.tenant, "user": record.user, "pe_hours": 0.0, "jobs": 0},
        )
        row["pe_hours"] += hours
        row["jobs"] += 1
    per_tenant: dict[str, dict[str, Any]] = {}
    for row in per_user.values():
        total = per_tenant.setdefault(
            row["tenant"], {"tenant": row["tenant"], "pe_hours": 0.0, "jobs": 0}
        )
        total["pe_hours"] += row["pe_hours"]
        total["jobs"] += row["jobs"]
    grand = sum(t["pe_hours"] for t in per_tenant.values())
    for row in [*per_user.values(), *per_tenant.values()]:
        row["pe_hours"] = round(row["pe_hours"], 6)
        row["percent"] = round(100.0 * row["pe_hours"] / grand, 2) if grand else 0.0
    return {
        "start": start,
        "end": end,
        "pe_hours": round(grand, 6),
        "tenants": sorted(per_tenant.values(), key=lambda r: (-r["pe_hours"], r["tenant"])),
        "users": sorted(per_user.values(), key=lambda r: (r["tenant"], -r["pe_hours"], r["user"])),
    }


def clipped_pe_hours(intervals: Iterable[list[Any]], start: datetime, end: datetime) -> float:
    """PE-hours of `[start ISO, end ISO, PEs]` runs inside [start, end]."""
    total = 0.0
    for begin_iso, end_iso, pes in intervals:
        begin = max(as_utc(datetime.fromisoformat(begin_iso)) or start, start)
        finish = min(as_utc(datetime.fromisoformat(end_iso)) or end, end)
        if finish > begin:
            total += int(pes) * (finish - begin).total_seconds() / 3600.0
    return total
