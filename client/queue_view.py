"""`sam queue`'s table, without click: the command (client.commands.queue) and its fast path
(client.fastqueue) draw the same lines from the same functions."""

from __future__ import annotations

from client.output import (
    STATE_CODES,
    STATE_LEGEND,
    format_reason,
    format_region,
    format_time,
    job_elapsed,
    now_utc,
    render_table,
    state_code,
)
from client.summaries import has_summaries, shown_reason, tasks_text

TYPE_CHECKING = False  # typing's import is spared on a short command's path
if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime
    from typing import Any

WAITING_STATES = ("queued", "compiling", "pending")
COLUMNS = ["JOBID", "TENANT", "NAME", "USER", "ST", "TIME", "REGION", "REASON"]
WIDE_COLUMNS = [*COLUMNS, "PRIORITY", "MODE", "PROGRESS", "SUBMITTED"]
NAME_WIDTH = 24
# Display order, as squeue does: what holds the machine first, then what waits, then history.
STATE_ORDER = {
    state: rank
    for rank, state in enumerate(("running", "cancelling", "pending", "compiling", "queued"))
}


def states_from(values: Iterable[str]) -> list[str]:
    """State names from `--state` values: names or short codes, repeated or comma-separated;
    ValueError names an unknown one."""
    by_code = {code.lower(): state for state, code in STATE_CODES.items()}
    states = []
    for value in values:
        for word in filter(None, (part.strip().lower() for part in value.split(","))):
            state = word if word in STATE_CODES else by_code.get(word)
            if state is None:
                raise ValueError(
                    f"unknown state {word!r}; use one of {', '.join(STATE_CODES)} or a code "
                    f"({STATE_LEGEND})"
                )
            states.append(state)
    return states


def queue_table(jobs: list[dict[str, Any]], *, wide: bool, no_headers: bool) -> str:
    """squeue's table; a TASKS column joins it when an array's waiting tasks share a row."""
    now = now_utc()
    rows = [job_row(job, wide=wide, now=now) for job in jobs]
    headers = WIDE_COLUMNS if wide else COLUMNS
    if has_summaries(jobs):
        headers = [*headers, "TASKS"]
        for row, job in zip(rows, jobs, strict=True):
            row.append(tasks_text(job))
    return render_table(headers, rows, no_headers=no_headers)


def display_key(job: dict[str, Any]) -> tuple[int, str]:
    # The API's times are all RFC 3339 UTC text of one form: as text they sort as times.
    return STATE_ORDER.get(job.get("state", ""), len(STATE_ORDER)), str(job.get("created_at") or "")


def job_row(
    job: dict[str, Any], *, wide: bool = False, now: datetime | None = None
) -> list[object]:
    """One squeue-style row for a job (the wide form adds priority, mode, progress, submit time)."""
    name = str(job.get("name") or "")
    if not wide and len(name) > NAME_WIDTH:
        name = name[: NAME_WIDTH - 1] + "~"
    row: list[object] = [
        job.get("id"),
        job.get("tenant"),
        name,
        job.get("user"),
        state_code(job.get("state")),
        job_elapsed(job, now or now_utc()),
        format_region(job.get("region")),
        format_reason(job, wide=wide, reason=shown_reason(job)),
    ]
    if wide:
        progress = job.get("progress") or {}
        step = progress.get("step")
        row += [
            job.get("priority"),
            job.get("mode"),
            f"{step}/{progress.get('total_steps')}" if step is not None else None,
            format_time(job.get("created_at")),
        ]
    return row
