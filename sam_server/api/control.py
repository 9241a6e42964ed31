"""Routes for scontrol's verbs: hold, release, requeue, update. Each takes a job id or an array
id (every task) and answers `{id, changed: [jobs], unchanged: [{id, why}]}`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.services import control
from sam_server.services.bulk import Pace

router = APIRouter(prefix="/api/v1", tags=["jobs"])


class JobUpdate(BaseModel):
    """What `sam update` changes; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")
    priority: str | None = None
    time_limit: str | int | None = None
    name: str | None = Field(default=None, max_length=128)


@router.post("/jobs/{job_id}/hold")
def hold(
    job_id: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """Keep a waiting job (or an array's waiting tasks) out of placement until released;
    409 for a job that already started."""
    pace = Pace.of(request.app.state.settings, session)
    return control.hold(session, principal=principal, job_id=job_id, pace=pace).view()


@router.post("/jobs/{job_id}/release")
def release(
    job_id: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """Lift a hold (403 for an admin's hold, unless the caller is a cluster admin)."""
    pace = Pace.of(request.app.state.settings, session)
    return control.release(session, principal=principal, job_id=job_id, pace=pace).view()


@router.post("/jobs/{job_id}/requeue")
def requeue(
    job_id: str, request: Request, session: SessionDep, principal: PrincipalDep, hold: bool = False
) -> dict[str, object]:
    """A running job checkpoints, frees its region and waits again (`hold=true`: held too)."""
    pace = Pace.of(request.app.state.settings, session)
    outcome = control.requeue(session, principal=principal, job_id=job_id, hold_it=hold, pace=pace)
    return outcome.view()


@router.patch("/jobs/{job_id}")
def update(
    job_id: str, body: JobUpdate, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """Change priority, time limit or name: lowering is anyone's right, raising an admin's."""
    return control.update(
        session,
        principal=principal,
        job_id=job_id,
        priority=body.priority,
        time_limit=body.time_limit,
        name=body.name,
    ).view()
