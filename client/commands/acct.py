"""`sam acct` (sacct) and `sam report usage` (sreport): accounting that outlives the queue."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from client.columns import (
    Column,
    columns_by_name,
    format_option,
    parse_format,
    render_csv,
    render_selected,
)
from client.commands.options import connection_options, echo_data, open_client
from client.commands.queue import parse_states
from client.commands.results import report as job_report
from client.output import format_duration, format_region, parse_time, state_code
from client.slurmtime import SlurmTimeError, parse_slurm_time

F = TypeVar("F", bound=Callable[..., Any])


def _time(key: str) -> Any:
    def value(record: dict[str, Any]) -> Any:
        moment = parse_time(record.get(key))
        return moment.astimezone().strftime("%Y-%m-%dT%H:%M:%S") if moment else None

    return value


def _job_id(record: dict[str, Any]) -> Any:
    if record.get("array_job_id") and record.get("array_task_id") is not None:
        return f"{record['array_job_id']}_{record['array_task_id']}"
    return record.get("job_id")


def _pes(record: dict[str, Any]) -> Any:
    region = record.get("region") or {}
    rows, cols = region.get("rows"), region.get("cols")
    return rows * cols if isinstance(rows, int) and isinstance(cols, int) else None


ACCT_COLUMNS = [
    Column("JobID", _job_id, "the job id (ARRAYID_TASK for an array task)"),
    Column("JobIDRaw", lambda r: r.get("job_id")),
    Column("ArrayJobID", lambda r: r.get("array_job_id")),
    Column("ArrayTaskID", lambda r: r.get("array_task_id")),
    Column("JobName", lambda r: r.get("name")),
    Column("Tenant", lambda r: r.get("tenant")),
    Column("Account", lambda r: r.get("tenant")),  # Slurm's name for it
    Column("User", lambda r: r.get("user")),
    Column("State", lambda r: str(r.get("state") or "").upper() or None),
    Column("ST", lambda r: state_code(r.get("state"))),
    Column("ExitKind", lambda r: r.get("exit_kind")),
    Column("Submit", _time("submit_at")),
    Column("Start", _time("start_at")),
    Column("End", _time("end_at")),
    Column("Elapsed", lambda r: format_duration(float(r.get("elapsed_s") or 0))),
    Column("ElapsedRaw", lambda r: int(float(r.get("elapsed_s") or 0))),
    Column("Timelimit", lambda r: format_duration(float(r.get("time_limit_s") or 0))),
    Column("Wafer", lambda r: r.get("wafer")),
    Column("Region", lambda r: format_region(r.get("region")) if r.get("region") else None),
    Column("PEs", _pes),
    Column("PEHours", lambda r: round(float(r.get("pe_hours") or 0.0), 3)),
    Column("Attempts", lambda r: r.get("attempts")),
    Column("Priority", lambda r: r.get("priority")),
    Column("Mode", lambda r: r.get("mode")),
]
ACCT_DEFAULT = "jobid,jobname,tenant,user,state,start,elapsed,region,pehours,exitkind"


def _period_value(text: str | None, option: str) -> str | None:
    if text is None:
        return None
    try:
        return parse_slurm_time(text).isoformat()
    except SlurmTimeError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def print_listing(
    items: list[dict[str, Any]],
    columns: list[Column],
    chosen: str | None,
    default: str,
    output: str,
    *,
    no_headers: bool = False,
    parsable: bool = False,
) -> None:
    """Print `items` as json, csv, `|`-separated (-P) or a table of the chosen columns."""
    if output == "json":
        echo_data(items, "json")
        return
    selected = parse_format(chosen or default, columns_by_name(columns))
    if output == "csv" or parsable:
        delimiter = "," if output == "csv" else "|"
        text = render_csv(selected, items, no_headers=no_headers, delimiter=delimiter)
        if text:
            click.echo(text)
        return
    text = render_selected(selected, items, no_headers=no_headers)
    if text:
        click.echo(text)


OUTPUT = click.Choice(["table", "json", "csv"])


def listing_options(columns: Sequence[Column], default: str) -> Callable[[F], F]:
    """The sacct/sreport listing options: -n/--noheader, -P/--parsable2, --format, -o/--output."""

    def decorate(command: F) -> F:
        for option in reversed(
            [
                click.option("-n", "--noheader", is_flag=True, help="Omit the header line."),
                click.option(
                    "-P", "--parsable2", "parsable", is_flag=True, help="Fields separated by `|`."
                ),
                format_option(columns, default),
                click.option("-o", "--output", type=OUTPUT, default="table", show_default=True),
            ]
        ):
            command = option(command)
        return command

    return decorate


@click.command()
@click.option(
    "-S", "--starttime", metavar="TIME", help="From TIME (default 00:00 today): now-7days, ..."
)
@click.option("-E", "--endtime", metavar="TIME", help="Up to TIME (default now).")
@click.option(
    "-s",
    "--state",
    "state_values",
    multiple=True,
    metavar="S",
    help="Only jobs in state S (name or code: CD, F, CA, R, PD...; comma-separated).",
)
@click.option("-u", "--user", metavar="NAME", help="Only this user's jobs.")
@click.option("-a", "--allusers", is_flag=True, help="Every user's jobs (of your tenant).")
@click.option("-A", "--tenant", "--account", "tenant", metavar="NAME", help="Only this tenant.")
@click.option(
    "-j", "--jobs", "job_values", multiple=True, metavar="ID", help="Only these jobs (or arrays)."
)
@click.option("-X", "--allocations", is_flag=True, help="Accepted for sacct habit (the default).")
@listing_options(ACCT_COLUMNS, ACCT_DEFAULT)
@connection_options
def acct(
    starttime: str | None,
    endtime: str | None,
    state_values: tuple[str, ...],
    user: str | None,
    allusers: bool,
    tenant: str | None,
    job_values: tuple[str, ...],
    allocations: bool,
    noheader: bool,
    parsable: bool,
    columns: str | None,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """Accounting of jobs, sacct style: those that existed from --starttime to --endtime.

    Ended jobs stay here after retention purged them from the queue; running and waiting jobs
    are shown live. Like sacct, only your own jobs unless -a/--allusers or --user (admins: all).
    Times take Slurm's forms: now-7days, today, 2026-11-01T08:00, 11/01, 08:30.
    """
    start = _period_value(starttime, "--starttime")
    end = _period_value(endtime, "--endtime")
    states = parse_states(state_values)
    parse_format(columns or ACCT_DEFAULT, columns_by_name(ACCT_COLUMNS))  # usage errors first
    client = open_client(url, token)
    jobs = [j for value in job_values for j in value.split(",") if j]
    if user is None and not allusers and not jobs:
        me = client.whoami()
        if me.get("role") != "admin":
            user = str(me["name"])
    data = client.acct(start=start, end=end, states=states, user=user, tenant=tenant, jobs=jobs)
    items = data.get("items") or []
    print_listing(
        items, ACCT_COLUMNS, columns, ACCT_DEFAULT, output, no_headers=noheader, parsable=parsable
    )


USAGE_COLUMNS = [
    Column("Tenant", lambda r: r.get("tenant")),
    Column("Account", lambda r: r.get("tenant")),
    Column("User", lambda r: r.get("user")),
    Column("PEHours", lambda r: round(float(r.get("pe_hours") or 0.0), 3)),
    Column("Jobs", lambda r: r.get("jobs")),
    Column("Percent", lambda r: f"{float(r.get('percent') or 0):.2f}%"),
]
USAGE_DEFAULT = "tenant,user,pehours,jobs,percent"


class ReportGroup(click.Group):
    """`sam report JOBID` (a job's performance report) and `sam report usage` (sreport)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """A first word that is not a subcommand is a job id: the job's report."""
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "job", self.commands["job"], args
        return super().resolve_command(ctx, args)


@click.group(cls=ReportGroup)
def report_group() -> None:
    """Reports: `sam report JOBID` (a job's performance) or `sam report usage` (PE-hours)."""


report_group.add_command(job_report, "job")


@report_group.command("usage")
@click.option("-S", "--start", "--starttime", "start", metavar="TIME", help="Default 00:00 today.")
@click.option("-E", "--end", "--endtime", "end", metavar="TIME", help="Default now.")
@click.option("-A", "--tenant", "--account", "tenant", metavar="NAME", help="Only this tenant.")
@click.option("--by", type=click.Choice(["user", "tenant"]), default="user", show_default=True)
@listing_options(USAGE_COLUMNS, USAGE_DEFAULT)
@connection_options
def usage(
    start: str | None,
    end: str | None,
    tenant: str | None,
    by: str,
    noheader: bool,
    parsable: bool,
    columns: str | None,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """PE-hours per tenant and user from --start to --end (sreport's AccountUtilizationByUser).

    Each run is clipped to the period; ended jobs only (their accounting records). A tenant's
    users see their tenant; the cluster admin every tenant.
    """
    begin, finish = _period_value(start, "--start"), _period_value(end, "--end")
    client = open_client(url, token)
    data = client.usage_report(start=begin, end=finish, tenant=tenant)
    if output == "json":
        echo_data(data, "json")
        return
    default = USAGE_DEFAULT if by == "user" else "tenant,pehours,jobs,percent"
    rows = data.get("users" if by == "user" else "tenants") or []
    if output == "table" and not parsable and not noheader:
        click.echo(
            f"Usage {_time('start')(data)} - {_time('end')(data)}: "
            f"{float(data.get('pe_hours') or 0):.3f} PE-hours",
            err=True,
        )
    print_listing(
        rows, USAGE_COLUMNS, columns, default, output, no_headers=noheader, parsable=parsable
    )
