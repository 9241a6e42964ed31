"""`sam status`, `sam cancel`, `sam logs` and `sam explain`: one job at a time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from client.commands.control import report_outcome
from client.commands.options import (
    connection_options,
    echo_data,
    echo_message,
    open_client,
    output_option,
)
from client.errors import SamAPIError
from client.output import (
    format_progress,
    format_region,
    format_time,
    job_elapsed,
    now_utc,
    parse_time,
    render_key_values,
    render_table,
    state_code,
)
from client.sdk import TERMINAL_STATES

KNOWN_JOB_FIELDS = (
    "id name tenant user state priority mode created_at started_at finished_at attempts "
    "reason region progress error compile entry"
).split()


@click.command()
@click.argument("job_id")
@output_option
@connection_options
def status(job_id: str, output: str, url: str | None, token: str | None) -> None:
    """Show one job.

    `-o wide` also lists fields this client version does not know.
    """
    job = open_client(url, token).get_job(job_id)
    if output in ("json", "yaml"):
        echo_data(job, output)
        return
    pairs = job_key_values(job)
    if output == "wide":
        pairs += [(key, value) for key, value in job.items() if key not in KNOWN_JOB_FIELDS]
    click.echo(render_key_values(pairs))


def job_key_values(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """The `Key: value` view of a job for people."""
    now = now_utc()
    progress = job.get("progress") or {}
    error = job.get("error")
    compiled = job.get("compile")
    script = _entry_text(job.get("entry"))
    pairs = [
        ("JobId", job.get("id")),
        ("Name", job.get("name")),
        ("Tenant", job.get("tenant")),
        ("User", job.get("user")),
        ("State", f"{job.get('state')} ({state_code(job.get('state'))})"),
        ("Priority", job.get("priority")),
        ("Mode", job.get("mode")),
        ("Script", script),
        ("Region", format_region(job.get("region"))),
        ("Progress", format_progress(progress)),
        ("Submitted", format_time(job.get("created_at"))),
        ("Started", format_time(job.get("started_at"))),
        ("Finished", format_time(job.get("finished_at"))),
        ("Time", job_elapsed(job, now)),
        ("Attempts", job.get("attempts")),
        ("Reason", job.get("reason")),
        ("Error", f"{error.get('kind')}: {error.get('message')}" if error else None),
        ("Compile", _compile_text(compiled) if compiled else None),
    ]
    return [p for p in pairs if p[0] != "Script" or script]  # a runner job's only


def _entry_text(entry: object) -> str | None:
    """A runner job's script as it runs: `train.py --lr 0.1` (args quoted as a shell would)."""
    if not isinstance(entry, dict) or not entry.get("script"):
        return None
    import shlex

    return shlex.join([str(entry["script"]), *(str(a) for a in entry.get("args") or [])])


def _compile_text(compiled: dict[str, Any]) -> str:
    hit = "cache hit" if compiled.get("cache_hit") else "compiled"
    seconds = compiled.get("seconds")
    took = f" in {seconds:.1f}s" if isinstance(seconds, int | float) else ""
    return f"{hit}{took}, artifact {compiled.get('artifact') or '-'}"


@click.command()
@click.argument("job_ids", nargs=-1, required=True, metavar="JOB...")
@connection_options
def cancel(job_ids: tuple[str, ...], url: str | None, token: str | None) -> None:
    """Cancel jobs (`ID_7`: one array task; an array's `ID`: all its unfinished tasks).

    Reports each job; exits 1 if any could not be cancelled.
    """
    client = open_client(url, token)
    failed = 0
    for job_id in job_ids:
        try:
            job = client.cancel_job(job_id)
        except SamAPIError as exc:
            failed += 1
            echo_message(f"error: job {job_id}: {exc.summary()}")
            continue
        if "changed" in job:  # an array id: every unfinished task
            report_outcome(job_id, job, "cancelled")
        elif job.get("state") == "cancelled":
            click.echo(f"job {job_id} cancelled")
        else:
            click.echo(f"job {job_id}: cancellation requested ({job.get('state')})")
    if failed:
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("job_id")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the job ends.")
@click.option("--tail", type=click.IntRange(min=1), metavar="N", help="Only the last N lines.")
@click.option(
    "--since",
    metavar="T",
    help="Only lines at or after T: an ISO time (2026-12-01T10:00:00Z) or an age (90s, 10m, 2h, 1d).",
)
@connection_options
def logs(
    job_id: str,
    follow: bool,
    tail: int | None,
    since: str | None,
    url: str | None,
    token: str | None,
) -> None:
    """Print a job's log; -f follows it until the job ends (surviving a server restart)."""
    client = open_client(url, token)
    since_iso = since_to_iso(since) if since else None
    after: str | None = None
    if not follow or tail or since_iso:  # a window first; a follow goes on from just after it
        text, after = client.logs_window(job_id, tail=tail, since=since_iso)
        if text:
            click.echo(text, nl=not text.endswith("\n"))
        if not follow:
            return
    try:
        for event in client.follow_logs(job_id, after=after):
            if event.event == "log":
                click.echo(event.data)
            elif event.event == "end":
                echo_message(f"job {job_id} ended: {_end_state(event.data)}")
                return
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_to_iso(value: str) -> str:
    """`--since` as the ISO time the API takes: an age (`10m`) counts back from now."""
    text = value.strip()
    if text[:-1].isdigit() and text[-1:] in _AGE_UNITS:
        at = now_utc() - timedelta(seconds=int(text[:-1]) * _AGE_UNITS[text[-1]])
        return at.isoformat()
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither an ISO time (2026-12-01T10:00:00Z) nor an age like 10m, 2h",
            param_hint="--since",
        ) from None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()


def _end_state(data: str) -> str:
    try:
        return str(json.loads(data).get("state"))
    except (ValueError, AttributeError):
        return data


@click.command()
@click.argument("job_id")
@output_option
@connection_options
def explain(job_id: str, output: str, url: str | None, token: str | None) -> None:
    """Why a job is not running: reasons, position, ETA, priority."""
    client = open_client(url, token)
    why = client.explain(job_id)
    if not isinstance(why.get("priority"), dict) and why.get("state") in (
        "queued",
        "compiling",
        "pending",
    ):
        why = {**why, "priority": _queue_priority(client.queue(), job_id)}
    if output in ("json", "yaml"):
        echo_data(why, output)
        return
    click.echo(explanation_text(job_id, why))


def _queue_priority(items: list[dict[str, Any]], job_id: str) -> dict[str, Any] | None:
    """The priority breakdown `{total, factors}` of a /queue entry, if the job is there."""
    for item in items:
        if str(item.get("id")) == str(job_id):
            for key in ("priority_detail", "priority"):
                if isinstance(item.get(key), dict):
                    detail: dict[str, object] = item[key]
                    return detail
    return None


def eta_text(state: object, eta: object) -> str:
    """The ETA line's value. The ETA comes from the last plan; one that has already passed
    (a compiling job's is the plan's own time: it may start once compiled) is said so, not
    shown as "(0:00 ago)"."""
    moment = parse_time(eta) if eta else None
    if moment is None:
        return "unknown"
    now = now_utc()
    if moment > now:
        return format_time(eta, now)
    if state == "compiling":
        return "as soon as its compile ends (a region is free for it)"
    return "any moment (the last plan's estimate has passed; the next cycle places it)"


def explanation_text(job_id: str, why: dict[str, Any]) -> str:
    """The explain view for people: state, position, ETA, reasons, priority breakdown."""
    state, position, eta = why.get("state"), why.get("position"), why.get("eta")
    if state in TERMINAL_STATES:
        lines = [f"Job {job_id} has ended: {state}"]
    else:
        where = f", position {position} in the queue" if position else ""
        lines = [f"Job {job_id} is {state}{where}"]
        lines.append(f"ETA: {eta_text(state, eta)}")
    reasons = why.get("reasons") or []
    if reasons:
        lines.append("Reasons:")
        lines += [f"  {r.get('code')}: {r.get('message')}" for r in reasons]
    elif why.get("state") in ("queued", "compiling", "pending"):
        lines.append("Reasons: none reported")
    priority = why.get("priority")
    if isinstance(priority, dict):
        lines.append(f"Priority: {priority.get('total')}")
        factors = priority.get("factors") or {}
        table = render_table(["FACTOR", "VALUE"], sorted(factors.items()))
        lines += [f"  {row}" for row in table.splitlines()] if factors else []
    return "\n".join(lines)
