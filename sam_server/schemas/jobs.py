"""Request and response bodies for jobs (docs/contract.md section 2, "Jobs")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import DateTime

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
    model_config = ConfigDict(extra="forbid")
    wafer: str
    row: int
    col: int
    rows: int
    cols: int


class Progress(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int
    total_steps: int
    loss: float | None


class JobError(BaseModel):
    model_config = ConfigDict(extra="forbid")
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
        "artifact_invalid",
        "host_oom",
    ]
    message: str


class CompileInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cache_hit: bool
    artifact: str | None
    seconds: float | None


class EntryRead(BaseModel):
    """A runner job's script and its arguments (docs/runner.md)."""

    model_config = ConfigDict(extra="forbid")
    script: str
    args: list[str]


class JobRead(BaseModel):
    """A job as every route answers it (`job_view` builds it; a test holds the two together)."""

    model_config = ConfigDict(extra="forbid")
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
    # Set once retention deleted this ended job's logs and step metrics (docs/operator-guide.md, "Operating at scale").
    history_purged_at: datetime | None = None
    # Arrays, dependencies, holds (docs/slurm.md).
    array_job_id: str | None = None
    array_task_id: int | None = None
    hold: Literal["user", "admin"] | None = None
    dependency: str | None = None
    # A runner job's script and args (docs/runner.md); null for a model job, and in listings.
    entry: EntryRead | None = None


class ArrayInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    indices: str  # the --array text, e.g. "0-99%10"
    tasks: int
    max_running: int | None


class ArraySubmitted(BaseModel):
    """The answer to an array's submit: the array, whose tasks are jobs `{id}_{index}`."""

    model_config = ConfigDict(extra="forbid")
    id: str
    array_job_id: str
    name: str
    tenant: str
    user: str
    state: str
    created_at: datetime
    array: ArrayInfo


class DryRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    valid: bool
    spec: dict[str, Any]
    region: dict[str, int]


def iso(value: datetime | None) -> str | None:
    """An RFC 3339 UTC timestamp (`...Z`), or None."""
    value = as_utc(value)
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


# The job object's fields that are a column of the same name, in the model's order; the
# timestamps among them (the columns of type DateTime) are sent as RFC 3339 text.
_FIELDS = tuple(JobRead.model_fields)
_COLUMNS = Job.__table__.columns
_SAME_NAME = tuple(name for name in _FIELDS if name in _COLUMNS)
_TIMESTAMPS = tuple(n for n in _SAME_NAME if isinstance(_COLUMNS[n].type, DateTime))
# The parts made of several columns: each field of the part's model and its column.
_REGION = {
    "wafer": "wafer_id",
    "row": "region_row",
    "col": "region_col",
    "rows": "region_rows",
    "cols": "region_cols",
}
_PROGRESS = {"step": "progress_step", "total_steps": "total_steps", "loss": "progress_loss"}
_COMPILE = {
    "cache_hit": "compile_cache_hit",
    "artifact": "compile_key",
    "seconds": "compile_seconds",
}
_ERROR = {"kind": "error_kind", "message": "error_message"}
_PARTS: dict[str, tuple[type[BaseModel], dict[str, str]]] = {
    "region": (RegionRead, _REGION),
    "progress": (Progress, _PROGRESS),
    "error": (JobError, _ERROR),
    "compile": (CompileInfo, _COMPILE),
}


def _check_view_matches_model() -> None:
    """Fail at import when a JobRead field has no column and no builder below, or a part's
    model and its column map disagree."""
    unbuilt = set(_FIELDS) - set(_SAME_NAME) - set(_PARTS) - {"tenant", "user", "entry"}
    wrong = [name for name, (model, cols) in _PARTS.items() if set(model.model_fields) != set(cols)]
    read = [*_SAME_NAME, *(c for _, columns in _PARTS.values() for c in columns.values())]
    missing = [c for c in read if c not in _COLUMNS]
    if unbuilt or wrong or missing:
        raise RuntimeError(
            f"job_view and JobRead disagree: fields built by nobody {sorted(unbuilt)}, parts "
            f"whose columns do not match their model {wrong}, no such Job column {missing}"
        )


_check_view_matches_model()

# Every column `view_of` reads: a listing selects these alone (sam_server.services.listing).
VIEW_COLUMNS = tuple(
    dict.fromkeys([*_SAME_NAME, *(c for _, columns in _PARTS.values() for c in columns.values())])
)


def job_view(job: Job, *, summary: bool = False) -> dict[str, object]:
    """The API object of `job` (a plain dict: cheap to build for every listing).

    `summary=True` (listings) cuts the error message to a short head: the full (capped) text
    is only in `GET /jobs/{id}`, so a page of failed jobs stays small.
    """
    return view_of(partial(getattr, job), job.tenant.name, job.user.name, summary=summary)


def view_of(
    column: Callable[[str], Any], tenant: str, user: str, *, summary: bool = False
) -> dict[str, object]:
    """The API object (`JobRead`) of a job row whose columns `column(name)` reads: a stored
    `Job`'s attributes, or the values a submit has just written (`values.get`: a column left
    out is NULL)."""
    view = dict.fromkeys(_FIELDS)  # in the model's order; the parts below keep their place
    view.update(zip(_SAME_NAME, map(column, _SAME_NAME), strict=True))
    for name in _TIMESTAMPS:
        view[name] = iso(view[name])
    view["tenant"], view["user"] = tenant, user
    if column("wafer_id") is not None:
        view["region"] = {field: column(name) for field, name in _REGION.items()}
    view["progress"] = {field: column(name) for field, name in _PROGRESS.items()}
    if column("error_kind"):
        message = column("error_message") or ""
        message = cap_text(message, SUMMARY_BYTES) if summary else message
        view["error"] = {"kind": column("error_kind"), "message": message}
    if column("compile_cache_hit") is not None:
        view["compile"] = {field: column(name) for field, name in _COMPILE.items()}
    if not summary:  # listings do not read the spec column (VIEW_COLUMNS)
        view["entry"] = entry_of(column("spec"))
    return view


def entry_of(spec: object) -> dict[str, Any] | None:
    """`{script, args}` of a runner job's spec, else None."""
    entry = spec.get("entry") if isinstance(spec, dict) else None
    if not isinstance(entry, dict) or not entry.get("script"):
        return None
    return {"script": str(entry["script"]), "args": [str(a) for a in entry.get("args") or []]}
