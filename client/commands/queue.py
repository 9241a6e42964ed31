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
    STATE_LEGEND,
    dump_data,
    format_reason,
    format_region,
    format_time,
    job_elapsed,
    now_utc,
    state_code,
)
from client.queue_view import WAITING_STATES, display_key, queue_table, states_from
from client.sdk import ACTIVE_STATES, SamClient
from client.summaries import shown_reason, tasks_text

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
    Column("Reason", lambda j: format_reason(j, reason=shown_reason(j))),
    Column("Tasks", tasks_text, "an array's collapsed row: its tasks by state"),
    Column("Priority", lambda j: j.get("priority")),
    Column("Mode", lambda j: j.get("mode")),
    Column("Attempts", lambda j: j.get("attempts")),
    Column("Submitted", lambda j: format_time(j.get("created_at"))),
    Column("Started", lambda j: format_time(j.get("started_at"))),
    Column("Step", lambda j: (j.get("progress") or {}).get("step")),
    Column("Loss", lambda j: (j.get("progress") or {}).get("loss")),
]
QUEUE_DEFAULT_FORMAT = "jobid,tenant,name,user,st,time,region,reason"


def parse_states(values: tuple[str, ...]) -> list[str]:
    """State names from `--state` values: names or short codes, repeated or comma-separated."""
    try:
        return states_from(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--state") from None


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
@click.option(
    "--jobs",
    "-j",
    "job_values",
    multiple=True,
    metavar="ID",
    help="Only these jobs, or these arrays' tasks one per row (repeatable or comma-separated).",
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
    job_values: tuple[str, ...],
    watch: float | None,
    columns: str | None,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """List jobs (by default those not yet ended), squeue style.

    An array's waiting tasks are one row, `ID_[0-9999]`, its TASKS column counting them by
    state; `--array` or `-j ID` lists each task.
    """
    states = parse_states(state_values) or ([] if show_all else list(ACTIVE_STATES))
    selected = parse_format(columns, columns_by_name(QUEUE_FORMAT_COLUMNS)) if columns else None
    jobs_wanted = [j for value in job_values for j in filter(None, value.replace(",", " ").split())]
    expand = expand_arrays or bool(jobs_wanted)
    client = open_client(url, token)
    if me:
        user = str(client.whoami()["name"])
    narrow: dict[str, Any] = {"states": states, "user": user, "tenant": tenant}
    narrow |= {"jobs": jobs_wanted, "expand_arrays": expand}

    def draw() -> str:
        if output in ("json", "yaml"):
            return dump_data(list(client.list_jobs(**narrow)), output)
        jobs = list(client.list_rows(**narrow))
        if output == "wide":
            jobs = with_scheduler_reasons(client, jobs)
        jobs.sort(key=display_key)
        if selected is not None:
            return render_selected(selected, jobs, no_headers=no_headers)
        return queue_table(jobs, wide=output == "wide", no_headers=no_headers)

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


def with_scheduler_reasons(
    client: SamClient, jobs: list[dict[str, Any]]
) -> list[dict[str, object]]:
    """Jobs with the scheduler's `reasons` (from /queue) added to those still waiting."""
    if not any(job.get("state") in WAITING_STATES for job in jobs):
        return jobs
    try:
        reasons = {str(item.get("id")): item.get("reasons") for item in client.queue()}
    except SamAPIError:
        return jobs  # the listing stands without them
    return [{**job, "reasons": reasons.get(str(job.get("id")))} for job in jobs]
