"""The bodies of `GET /jobs` (docs/contract.md section 2, "Jobs"; docs/cli-listing.md).

Two views of the same listing. `view=full` (the default) answers `{items, next_cursor}`, every
item a job object (`JobRead`), as it always has. `view=slim` answers `{columns, rows,
next_cursor}`: one JSON array per job with the few values a queue listing shows, in the order of
`columns` (a third of the bytes, and no object to build per row on either side), with pages of up
to `SAM_LISTING_MAX_ROWS` rows.

Either way, by default (`arrays=collapse`), an array's waiting tasks (queued, compiling,
pending) are ONE row, as Slurm keeps a pending array as one record: its `id` is Slurm's
`ARRAYID_[0-9999]`, `array_task_id` is null and `summary` counts the tasks it stands for by state
and by reason. Running and ended tasks keep a row each. `arrays=expand`: every task a row.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sam_server.schemas.jobs import JobRead

ArraysMode = Literal["collapse", "expand"]
View = Literal["full", "slim"]


class ArraySummary(BaseModel):
    """What one collapsed row of an array stands for: its waiting tasks that match the filters."""

    model_config = ConfigDict(extra="forbid")
    # the tasks' indices as Slurm writes them: "0-9999", "1-3,5,7-9"
    indices: str
    tasks: int
    # tasks per state and per reason ("JobHeldUser": 9000, ...); a reason-less task counts as "None"
    states: dict[str, int]
    reasons: dict[str, int]


class JobListItem(JobRead):
    """A listed job: the job object, and on an array's collapsed row its `summary`."""

    summary: ArraySummary | None = None


class JobListPage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[JobListItem]
    next_cursor: str | None


# The values of a slim row, in this order (a running job's `region` is {wafer, row, col, rows,
# cols}, null otherwise; `error_kind` is the error's kind, its message is in GET /jobs/{id}).
SLIM_COLUMNS = (
    "id",
    "name",
    "tenant",
    "user",
    "state",
    "priority",
    "mode",
    "created_at",
    "started_at",
    "finished_at",
    "attempts",
    "reason",
    "hold",
    "region",
    "step",
    "total_steps",
    "loss",
    "error_kind",
    "array_job_id",
    "array_task_id",
    "summary",
)


class JobRows(BaseModel):
    """`view=slim`: each row holds the values of `columns` (SLIM_COLUMNS), in that order."""

    model_config = ConfigDict(extra="forbid")
    columns: list[str]
    rows: list[list[Any]]
    next_cursor: str | None
