"""Routes for a job's results: what there is to fetch, the final weights and each checkpoint.

Only the job's tenant (and admins) can read them: `get_job` answers 404 for anyone else.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import FileResponse

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.errors import NotFound
from sam_server.schemas.numbers import INT32_MAX
from sam_server.services import jobs as svc
from sam_server.services import results

router = APIRouter(prefix="/api/v1", tags=["results"])


@router.get("/jobs/{job_id}/artifacts")
def artifacts(
    job_id: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """What can be downloaded: `{weights, checkpoints: [{step, bytes, url}], report}`."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    return results.job_artifacts(request.app.state.settings.data_dir, job)


@router.get("/jobs/{job_id}/weights", response_class=FileResponse)
def weights(job_id: str, request: Request, session: SessionDep, principal: PrincipalDep) -> Any:
    """The final weights: a torch state_dict keyed by the model's own parameter and buffer
    names; load it with `torch.load(path, weights_only=True)`."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    path = results.weights_path(request.app.state.settings.data_dir, job.id)
    if not path.is_file():
        raise NotFound(
            f"job {job.id} has no final weights ({job.state}); they are written when a training "
            f"job succeeds; `sam fetch {job.id} --checkpoint STEP` gets a checkpoint"
        )
    return FileResponse(
        path, media_type="application/octet-stream", filename=f"{job.id}-weights.pt"
    )


@router.get("/jobs/{job_id}/checkpoints/{step}", response_class=FileResponse)
def checkpoint(
    job_id: str,
    step: Annotated[int, Path(ge=0, le=INT32_MAX)],
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
) -> Any:
    """Checkpoint `step` as .npz (numpy, no pickles): weights, buffers and optimizer state
    ("fc.weight.exp_avg") under the model's names, plus `_steps_done`."""
    job = svc.get_job(session, principal=principal, job_id=job_id)
    directory = results.job_checkpoint_dir(request.app.state.settings.data_dir, job)
    path = results.checkpoint_file(directory, step)
    if path is None:
        have = [c["step"] for c in results.list_checkpoints(directory)]
        raise NotFound(f"job {job.id} has no checkpoint of step {step}; it has {have or 'none'}")
    return FileResponse(
        path, media_type="application/octet-stream", filename=f"{job.id}-step-{step}.npz"
    )
