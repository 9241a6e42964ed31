"""Request and response bodies for jobs (CONTRACT section 2, "Jobs")."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sam_server.db.models import Job
from sam_server.db.types import as_utc
from sam_server.services.bounds import SUMMARY_BYTES, cap_text


class JobSubmit(BaseModel):
    """`spec` is the job.yaml as a JSON object (or `spec_yaml` its text); `files` maps names to text."""

    model_config = ConfigDict(extra="forbid")
    spec: dict[str, Any] | None = None
    spec_yaml: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class RegionRead(BaseModel):
    wafer: str
    row: int
    col: int
    rows: int
    cols: int


class Progress(BaseModel):
    step: int
    total_steps: int
    loss: float | None


class JobError(BaseModel):
    kind: Literal[
        "invalid_spec",
        "model_error",
        "unsupported_op",
        "compile_oom",
        "numerical",
        "timeout",
        "worker_lost",
        "internal",
        "artifact_corrupt",
    ]
    message: str


class CompileInfo(BaseModel):
    cache_hit: bool
    artifact: str | None
    seconds: float | None


class JobRead(BaseModel):
    id: str
    name: str
    tenant: str
    user: str
    state: str
    priority: str
    mode: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    reason: str | None
    region: RegionRead | None
    progress: Progress
    error: JobError | None
    compile: CompileInfo | None
    # Arrays, dependencies, holds (README "Job arrays, dependencies, holds").
    array_job_id: str | None = None
    array_task_id: int | None = None
    hold: Literal["user", "admin"] | None = None
    dependency: str | None = None


class JobPage(BaseModel):
    items: list[JobRead]
    next_cursor: str | None


class DryRun(BaseModel):
    valid: bool
    spec: dict[str, Any]
    region: dict[str, int]


def iso(value: datetime | None) -> str | None:
    """An RFC 3339 UTC timestamp (`...Z`), or None."""
    value = as_utc(value)
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def job_view(job: Job, *, summary: bool = False) -> dict[str, Any]:
    """The API object of `job` (a plain dict: cheap to build for every listing).

    `summary=True` (listings) cuts the error message to a short head: the full (capped) text
    is only in `GET /jobs/{id}`, so a page of failed jobs stays small.
    """
    region = None
    if job.wafer_id is not None:
        region = {
            "wafer": job.wafer_id,
            "row": job.region_row,
            "col": job.region_col,
            "rows": job.region_rows,
            "cols": job.region_cols,
        }
    error = None
    if job.error_kind:
        message = job.error_message or ""
        error = {
            "kind": job.error_kind,
            "message": cap_text(message, SUMMARY_BYTES) if summary else message,
        }
    compile_info = None
    if job.compile_cache_hit is not None:
        compile_info = {
            "cache_hit": job.compile_cache_hit,
            "artifact": job.compile_key,
            "seconds": job.compile_seconds,
        }
    return {
        "id": job.id,
        "name": job.name,
        "tenant": job.tenant.name,
        "user": job.user.name,
        "state": job.state,
        "priority": job.priority,
        "mode": job.mode,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "attempts": job.attempts,
        "reason": job.reason,
        "region": region,
        "progress": {
            "step": job.progress_step,
            "total_steps": job.total_steps,
            "loss": job.progress_loss,
        },
        "error": error,
        "compile": compile_info,
        # set once retention deleted this ended job's logs and step metrics
        "history_purged_at": iso(getattr(job, "history_purged_at", None)),
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
        "hold": job.hold,
        "dependency": job.dependency,
    }
