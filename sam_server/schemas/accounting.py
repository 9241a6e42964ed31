"""Response bodies of accounting: `GET /api/v1/acct` and `GET /api/v1/reports/usage`."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class AcctRegion(BaseModel):
    wafer: str
    row: int | None
    col: int | None
    rows: int | None
    cols: int | None


class AcctRecord(BaseModel):
    """One job (or array task) as accounting knows it; kept after the job row is purged."""

    job_id: str
    array_job_id: str | None
    array_task_id: int | None
    tenant: str
    user: str
    name: str
    mode: str
    priority: str
    state: str
    exit_kind: str | None
    submit_at: datetime
    start_at: datetime | None
    end_at: datetime | None
    elapsed_s: float
    time_limit_s: int
    wafer: str | None
    region: AcctRegion | None
    pe_hours: float
    attempts: int


class AcctPage(BaseModel):
    start: datetime
    end: datetime
    items: list[AcctRecord]


class TenantUsage(BaseModel):
    tenant: str
    pe_hours: float
    jobs: int
    percent: float


class UserUsage(TenantUsage):
    user: str


class UsageReport(BaseModel):
    """PE-hours per tenant and user of the runs inside [start, end] (clipped to it)."""

    start: datetime
    end: datetime
    pe_hours: float
    tenants: list[TenantUsage]
    users: list[UserUsage]
