"""Listing rows for `sam queue`: the server's slim rows as job dicts, and an array's collapsed row.

`GET /jobs?view=slim` answers `{columns, rows}` (docs/cli-listing.md); `job_from_row` turns one
row into the shape of a job object that client.output's formatters read (`region`, `progress`,
`error`), without the fields a listing never shows. A collapsed array row carries `summary`
`{indices, tasks, states, reasons}`: its id is already Slurm's `ID_[0-9999]`, and
`tasks_text` writes its counts (`9990 Q,10 CG`, in the order of a job's life) for the TASKS column.
"""

from __future__ import annotations

from client.output import STATE_CODES, state_code

TYPE_CHECKING = False  # typing's import is spared on a short command's path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

HELD_REASONS = {"user": "JobHeldUser", "admin": "JobHeldAdmin"}


def jobs_from_rows(columns: list[str], rows: Iterable[list[object]]) -> Iterator[dict[str, object]]:
    """Each slim row as a job dict (unknown columns of a newer server are kept as they are)."""
    for row in rows:
        job = dict(zip(columns, row, strict=False))
        job["progress"] = {
            "step": job.pop("step", None),
            "total_steps": job.pop("total_steps", None),
            "loss": job.pop("loss", None),
        }
        kind = job.pop("error_kind", None)
        job["error"] = {"kind": kind, "message": ""} if kind else None
        yield job


def shown_reason(job: Mapping[str, object]) -> object:
    """The reason a listing shows: a held job's hold (even before the scheduler has looked at
    it), else the job's own `reason`."""
    hold = job.get("hold")
    if hold in HELD_REASONS and job.get("state") in ("queued", "compiling", "pending"):
        return HELD_REASONS[hold]
    return job.get("reason")


def tasks_text(job: Mapping[str, object]) -> str | None:
    """`10000 Q` or `9990 Q,5 CG,5 PD`: a collapsed array row's tasks by state (None for a job)."""
    summary = job.get("summary")
    if not isinstance(summary, dict):
        return None
    states = summary.get("states") or {}
    if not isinstance(states, dict) or not states:
        return str(summary.get("tasks", ""))
    order = {state: rank for rank, state in enumerate(STATE_CODES)}  # a job's life's order
    ranked = sorted(states.items(), key=lambda pair: order.get(pair[0], len(order)))
    return ",".join(f"{count} {state_code(state)}" for state, count in ranked)


def has_summaries(jobs: Iterable[Mapping[str, object]]) -> bool:
    """Whether any row of a listing is an array's collapsed row."""
    return any(isinstance(job.get("summary"), dict) for job in jobs)
