"""`sam queue`: jobs, squeue style."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from client.columns import Column, columns_by_name, format_option, parse_format, render_selected
from client.commands.options import connection_options, open_client, output_option
from client.errors import SamAPIError
from client.output import (
    STATE_CODES,
    STATE_LEGEND,
    dump_data,
    format_reason,
    format_region,
    format_time,
    job_elapsed,
    now_utc,
    parse_time,
    render_table,
    state_code,
)
from client.sdk import ACTIVE_STATES, SamClient

WAITING_STATES = ("queued", "compiling", "pending")

COLUMNS = ["JOBID", "TENANT", "NAME", "USER", "ST", "TIME", "REGION", "REASON"]
# --format columns (squeue -O's idea); the plain table above stays the default.
QUEUE_FORMAT_COLUMNS = [
    Column("JobID", lambda j: j.get("id")),
    Column("Tenant", lambda j: j.get("tenant")),
    Column("Name", lambda j: j.get("name")),
    Column("User", lambda j: j.get("user")),
    Column("ST", lambda j: state_code(j.get("state"))),
    Column("State", lambda j: j.get("state")),
    Column("Time", lambda j: job_elapsed(j, now_utc())),
    Column("Region", lambda j: format_region(j.get("region"))),
    Column("Reason", lambda j: format_reason(j)),
    Column("Priority", lambda j: j.get("priority")),
    Column("Mode", lambda j: j.get("mode")),
    Column("Attempts", lambda j: j.get("attempts")),
    Column("Submitted", lambda j: format_time(j.get("created_at"))),
    Column("Started", lambda j: format_time(j.get("started_at"))),
    Column("Step", lambda j: (j.get("progress") or {}).get("step")),
    Column("Loss", lambda j: (j.get("progress") or {}).get("loss")),
]
QUEUE_DEFAULT_FORMAT = "jobid,tenant,name,user,st,time,region,reason"
WIDE_COLUMNS = [*COLUMNS, "PRIORITY", "MODE", "PROGRESS", "SUBMITTED"]
NAME_WIDTH = 24
# Display order, as squeue does: what holds the machine first, then what waits, then history.
STATE_ORDER = {
    state: rank
    for rank, state in enumerate(("running", "cancelling", "pending", "compiling", "queued"))
}


def parse_states(values: tuple[str, ...]) -> list[str]:
    """State names from `--state` values: names or short codes, repeated or comma-separated."""
    by_code = {code.lower(): state for state, code in STATE_CODES.items()}
    states = []
    for value in values:
        for word in filter(None, (part.strip().lower() for part in value.split(","))):
            state = word if word in STATE_CODES else by_code.get(word)
            if state is None:
                raise click.BadParameter(
                    f"unknown state {word!r}; use one of {', '.join(STATE_CODES)} or a code ({STATE_LEGEND})",
                    param_hint="--state",
                )
            states.append(state)
    return states


@click.command(epilog=f"ST codes: {STATE_LEGEND}.")
@click.option("--all", "show_all", is_flag=True, help="Include ended jobs.")
@click.option(
    "--state",
    "-t",
    "state_values",
    multiple=True,
    metavar="S",
    help="Only jobs in state S (name or code; repeatable or comma-separated).",
)
@click.option("--user", "-u", metavar="NAME", help="Only this user's jobs.")
@click.option("--me", is_flag=True, help="Only my jobs (the token's user).")
@click.option("--tenant", metavar="NAME", help="Only this tenant's jobs (admins).")
@click.option(
    "--no-headers", "--noheader", "no_headers", is_flag=True, help="Omit the header line."
)
@click.option(
    "--watch",
    "-i",
    "--iterate",
    "watch",
    is_flag=False,
    flag_value="2",
    default=None,
    type=click.FloatRange(min=0.2),
    metavar="[SECONDS]",
    help="Redraw every SECONDS (default 2) until Ctrl-C (squeue -i).",
)
@click.option(
    "--array",
    "-r",
    "expand_arrays",
    is_flag=True,
    help="One row per array task (by default an array's waiting tasks share a row: ID_[3-99]).",
)
@format_option(QUEUE_FORMAT_COLUMNS, QUEUE_DEFAULT_FORMAT)
@output_option
@connection_options
def queue(
    show_all: bool,
    state_values: tuple[str, ...],
    user: str | None,
    me: bool,
    tenant: str | None,
    no_headers: bool,
    expand_arrays: bool,
    watch: float | None,
    columns: str | None,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """List jobs (by default those not yet ended), squeue style."""
    states = parse_states(state_values) or ([] if show_all else list(ACTIVE_STATES))
    selected = parse_format(columns, columns_by_name(QUEUE_FORMAT_COLUMNS)) if columns else None
    client = open_client(url, token)
    if me:
        user = str(client.whoami()["name"])

    def draw() -> str:
        jobs = list(client.list_jobs(states=states, user=user, tenant=tenant))
        if output in ("json", "yaml"):
            return dump_data(jobs, output)
        jobs = with_scheduler_reasons(client, jobs)
        jobs.sort(key=_display_key)
        if not expand_arrays:
            jobs = collapse_arrays(jobs)
        if selected is not None:
            return render_selected(selected, jobs, no_headers=no_headers)
        wide = output == "wide"
        rows = [job_row(job, wide=wide) for job in jobs]
        return render_table(WIDE_COLUMNS if wide else COLUMNS, rows, no_headers=no_headers)

    if watch is None:
        text = draw()
        if text:
            click.echo(text)
        return
    watch_screen(draw, watch)


def watch_screen(draw: Callable[[], str], every_s: float) -> None:
    """Redraw `draw()`'s text every `every_s` seconds (screen cleared on a terminal, a
    timestamped block otherwise) until Ctrl-C, which exits 0 as `watch` and `squeue -i` do."""
    terminal = sys.stdout.isatty()
    try:
        while True:
            text = draw()
            stamp = time.strftime("%a %b %d %H:%M:%S %Y")
            if terminal:
                click.clear()
            click.echo(f"{stamp} (every {every_s:g}s; Ctrl-C to stop)\n{text}".rstrip(), nl=True)
            sys.stdout.flush()
            time.sleep(every_s)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(0) from None


def with_scheduler_reasons(client: SamClient, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Jobs with the scheduler's `reasons` (from /queue) added to those still waiting."""
    if not any(job.get("state") in WAITING_STATES for job in jobs):
        return jobs
    try:
        reasons = {str(item.get("id")): item.get("reasons") for item in client.queue()}
    except SamAPIError:
        return jobs  # the listing stands without them
    return [{**job, "reasons": reasons.get(str(job.get("id")))} for job in jobs]


COLLAPSED_STATES = ("queued", "pending")


def collapse_arrays(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """squeue's view of arrays: an array's tasks waiting in one state for one reason share a
    row whose id lists their indices (`ID_[3-5,7,9-99]`); running and ended tasks keep theirs."""
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str], tuple[dict[str, Any], list[int]]] = {}
    for job in jobs:
        array_id, index = job.get("array_job_id"), job.get("array_task_id")
        if not array_id or index is None or job.get("state") not in COLLAPSED_STATES:
            rows.append(job)
            continue
        key = (str(array_id), str(job.get("state")), format_reason(job))
        if key not in groups:
            row = dict(job)
            groups[key] = (row, [])
            rows.append(row)
        groups[key][1].append(int(index))
    for (array_id, _, _), (row, indices) in groups.items():
        if len(indices) > 1:
            row["id"] = f"{array_id}_[{index_ranges(indices)}]"
    return rows


def index_ranges(indices: list[int]) -> str:
    """`[3, 4, 5, 7]` as `3-5,7`."""
    runs: list[list[int]] = []
    for index in sorted(indices):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _display_key(job: dict[str, Any]) -> tuple[int, float]:
    created = parse_time(job.get("created_at"))
    return STATE_ORDER.get(
        job.get("state", ""), len(STATE_ORDER)
    ), created.timestamp() if created else 0.0


def job_row(job: dict[str, Any], *, wide: bool = False) -> list[Any]:
    """One squeue-style row for a job (the wide form adds priority, mode, progress, submit time)."""
    name = str(job.get("name") or "")
    if not wide and len(name) > NAME_WIDTH:
        name = name[: NAME_WIDTH - 1] + "~"
    row: list[Any] = [
        job.get("id"),
        job.get("tenant"),
        name,
        job.get("user"),
        state_code(job.get("state")),
        job_elapsed(job, now_utc()),
        format_region(job.get("region")),
        format_reason(job, wide=wide),
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
