"""Routes for accounting: `sacct` (`GET /acct`) and `sreport` usage (`GET /reports/usage`).

Thin: `services.accounting` does the work. A tenant's principal sees its own tenant; the
cluster admin every tenant (`tenant=` narrows).
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Annotated

from fastapi import APIRouter, Query

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.db.types import as_utc, utcnow
from sam_server.errors import BadRequest
from sam_server.schemas.accounting import AcctPage, UsageReport
from sam_server.services import accounting as svc

router = APIRouter(prefix="/api/v1", tags=["accounting"])


def period(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """[start, end] in UTC; sacct's defaults: from 00:00 today (UTC) to now."""
    now = utcnow()
    begin = as_utc(start) or datetime.combine(now.date(), time(0), tzinfo=UTC)
    finish = as_utc(end) or now
    if begin > finish:
        raise BadRequest(
            f"start ({begin.isoformat()}) is after end ({finish.isoformat()}); swap them or "
            "move start earlier"
        )
    return begin, finish


@router.get("/acct", response_model=AcctPage)
def acct(
    session: SessionDep,
    principal: PrincipalDep,
    start: datetime | None = None,
    end: datetime | None = None,
    state: Annotated[list[str] | None, Query()] = None,
    user: str | None = None,
    tenant: str | None = None,
    job: Annotated[list[str] | None, Query()] = None,
) -> dict[str, object]:
    """Accounting records of the jobs that existed during [start, end] (default: today so far),
    oldest first; ended jobs are kept after retention purged them, running ones are live.
    `state` and `job` may repeat; `job` also matches an array's tasks by the array's id."""
    begin, finish = period(start, end)
    items = svc.list_records(
        session,
        principal=principal,
        start=begin,
        end=finish,
        states=state,
        user=user,
        tenant=tenant,
        job_ids=job,
    )
    return {"start": begin, "end": finish, "items": items}


@router.get("/reports/usage", response_model=UsageReport)
def usage(
    session: SessionDep,
    principal: PrincipalDep,
    start: datetime | None = None,
    end: datetime | None = None,
    tenant: str | None = None,
) -> dict[str, object]:
    """PE-hours per tenant and per user of ended jobs' runs inside [start, end] (default:
    today so far), each run clipped to the period (sreport's AccountUtilizationByUser)."""
    begin, finish = period(start, end)
    return svc.usage_report(session, principal=principal, start=begin, end=finish, tenant=tenant)
