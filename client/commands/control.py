"""`sam hold`, `sam release`, `sam requeue`, `sam update`: scontrol's verbs, on a job (`ID`,
`ID_7` for one array task) or a whole array (`ID`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from client.commands.options import connection_options, echo_message, open_client
from client.errors import SamAPIError
from client.sdk import SamClient


def run_verb(
    job_ids: tuple[str, ...],
    verb: Callable[[SamClient, str], dict[str, Any]],
    done: str,
    url: str | None,
    token: str | None,
) -> None:
    """Apply `verb` to each id, print what changed; exit 1 if any id failed."""
    client = open_client(url, token)
    failed = 0
    for job_id in job_ids:
        try:
            outcome = verb(client, job_id)
        except SamAPIError as exc:
            failed += 1
            echo_message(f"error: job {job_id}: {exc.summary()}")
            continue
        report_outcome(job_id, outcome, done)
    if failed:
        raise click.exceptions.Exit(1)


def report_outcome(job_id: str, outcome: dict[str, Any], done: str) -> None:
    """`job ID held`, or for an array `array ID: 6 tasks held, 1 unchanged (...)`."""
    changed = outcome.get("changed") or []
    unchanged = outcome.get("unchanged") or []
    single = len(changed) + len(unchanged) == 1 and (changed or unchanged)[0]["id"] == job_id
    if single:
        if changed:
            click.echo(f"job {job_id} {done}")
        else:
            click.echo(f"job {job_id} unchanged: {unchanged[0]['why']}")
        return
    # An array's answer lists the first tasks of each kind and counts them all.
    n_changed = outcome.get("changed_count", len(changed))
    n_unchanged = outcome.get("unchanged_count", len(unchanged))
    line = f"array {job_id}: {n_changed} task{'s' if n_changed != 1 else ''} {done}"
    if n_unchanged:
        whys = sorted({u["why"] for u in unchanged})
        line += f", {n_unchanged} unchanged ({'; '.join(whys[:3])})"
    click.echo(line)


JOBS = click.argument("job_ids", nargs=-1, required=True, metavar="JOB...")


@click.command()
@JOBS
@connection_options
def hold(job_ids: tuple[str, ...], url: str | None, token: str | None) -> None:
    """Keep waiting jobs from starting until `sam release` (an array id: every waiting task).

    The queue shows the reason JobHeldUser (JobHeldAdmin when an admin held it: only an admin
    can release that).
    """
    run_verb(job_ids, lambda c, j: c.hold_job(j), "held", url, token)


@click.command()
@JOBS
@connection_options
def release(job_ids: tuple[str, ...], url: str | None, token: str | None) -> None:
    """Let held jobs start again (an array id: every held task)."""
    run_verb(job_ids, lambda c, j: c.release_job(j), "released", url, token)


@click.command()
@JOBS
@click.option("--hold", "hold_it", is_flag=True, help="Also hold it (scontrol requeuehold).")
@connection_options
def requeue(job_ids: tuple[str, ...], hold_it: bool, url: str | None, token: str | None) -> None:
    """Send running jobs back to the queue: each checkpoints, frees its region and waits
    again, resuming from that checkpoint when it is placed."""
    run_verb(job_ids, lambda c, j: c.requeue_job(j, hold=hold_it), "requeued", url, token)


@click.command()
@click.argument("job_id")
@click.option(
    "--priority",
    type=click.Choice(["low", "normal", "high", "urgent"]),
    help="New priority class: anyone may lower it, raising needs a cluster admin.",
)
@click.option(
    "--time-limit",
    metavar="T",
    help="New time limit (90s, 30m, 2h) of a job not yet running: lower it freely, raising needs an admin.",
)
@click.option("--name", metavar="NAME", help="New name.")
@connection_options
def update(
    job_id: str,
    priority: str | None,
    time_limit: str | None,
    name: str | None,
    url: str | None,
    token: str | None,
) -> None:
    """Change a job's (or every task's of an array) priority, time limit or name."""
    if priority is None and time_limit is None and name is None:
        raise click.UsageError("give at least one of --priority, --time-limit, --name")
    run_verb(
        (job_id,),
        lambda c, j: c.update_job(j, priority=priority, time_limit=time_limit, name=name),
        "updated",
        url,
        token,
    )
