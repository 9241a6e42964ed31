"""`sam`, the command line of SAM: the client commands plus the server-side plugins.

Exit status: 0 success, 1 the operation failed (HTTP error, server unreachable, bad job file),
2 bad usage.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import click

from client.errors import SamAPIError, SamClientError
from client.fastpath import api_error_lines
from client.plugins import EntryPointLike, discover_plugins, load_plugin, unavailable_command

# name -> "module:attribute". Imported only when invoked (or listed by --help/completion), so
# `sam submit` pays for submit's imports alone: a sweep of 1,000 submits is mostly start-ups.
CLIENT_COMMANDS: dict[str, str] = {
    "submit": "client.commands.submit:submit",
    "run": "client.commands.run:run",
    "queue": "client.commands.queue:queue",
    "status": "client.commands.jobs:status",
    "cancel": "client.commands.jobs:cancel",
    "logs": "client.commands.jobs:logs",
    "explain": "client.commands.jobs:explain",
    "metrics": "client.commands.results:metrics",
    "report": "client.commands.acct:report_group",
    "fetch": "client.commands.fetch:fetch",
    "cluster": "client.commands.cluster:cluster",
    "whoami": "client.commands.cluster:whoami",
    "login": "client.commands.login:login",
    "admin": "client.commands.admin:admin",
    "token": "client.commands.tokens:token_group",
    "acct": "client.commands.acct:acct",
    "config": "client.commands.contexts:config_group",
    "completion": "client.commands.completion:completion",
    "hold": "client.commands.control:hold",
    "release": "client.commands.control:release",
    "requeue": "client.commands.control:requeue",
    "update": "client.commands.control:update",
    "data": "client.commands.data:data_group",
}


# What `sam --help` says of each command, without importing it (importing every command for
# its docstring made `sam --help` take 0.4 s); tests/client/test_help.py holds each to the
# command's own short help.
SHORT_HELP = {
    "submit": "Submit a job file (job.yaml) and the files it names.",
    "run": "Submit a Runner script (train.py) and its folder as a job; --wait follows it.",
    "queue": "List jobs (by default those not yet ended), squeue style.",
    "status": "Show one job.",
    "cancel": "Cancel jobs (`ID_7`: one array task; an array's `ID`: all its unfinished tasks).",
    "logs": "Print a job's log; -f follows it until the job ends (surviving a server restart).",
    "explain": "Why a job is not running: reasons, position, ETA, priority.",
    "metrics": "Per-step loss, simulated cycles and throughput of a job.",
    "report": "Reports: `sam report JOBID` (a job's performance) or `sam report usage` (PE-hours).",
    "fetch": "Download a job's results: weights.pt (a torch state_dict under the model's own "
    "names; `torch.load(path, weights_only=True)`), checkpoints/step-N.npz and report.json.",
    "cluster": "Wafers, the regions jobs hold on them, and compile servers (--format: the wafers "
    "only).",
    "whoami": "The principal the token belongs to: name, tenant, role.",
    "login": "Save a server URL and token in ~/.config/sam/config.toml (mode 0600), in the context "
    "in use if there is one (`--context`, SAM_CONTEXT, `sam config use-context`).",
    "admin": "Administer tenants, users and tokens.",
    "token": "API tokens: list, revoke, rotate (secrets are shown only when made).",
    "acct": "Accounting of jobs, sacct style: those that existed from --starttime to --endtime.",
    "config": "Contexts in ~/.config/sam/config.toml: set-context, use-context, get-contexts.",
    "completion": "Print the completion script for SHELL (commands, options, choices and file "
    "names).",
    "hold": "Keep waiting jobs from starting until `sam release` (an array id: every waiting "
    "task).",
    "release": "Let held jobs start again (an array id: every held task).",
    "requeue": "Send running jobs back to the queue: each checkpoints, frees its region and waits "
    "again, resuming from that checkpoint when it is placed.",
    "update": "Change a job's (or every task's of an array) priority, time limit or name.",
    "data": "Data sets: upload once, read from many jobs at /datasets/NAME.",
}
# The same for this project's own plugins, by their entry point's target: a plugin declared
# with another target (a third party's, or a broken one) is imported to be described.
PLUGIN_SHORT_HELP = {
    "sam_server.cli:db": "Database administration.",
    "sam_worker.cli:demo": "`sam up` plus a tour: tenants, jobs of several priorities sharing a "
    "wafer, their results.",
    "sam_server.cli:scheduler": "Run the scheduler loop: snapshot, plan, write decisions, "
    "dispatch (one leader at a time).",
    "sam_server.cli:server": "Run the control plane (REST API). On SQLite it creates or upgrades "
    "the database itself.",
    "sam_server.replay.cli:sim": "Replay TRACE (.swf or .swf.gz) on simulated wafers; print "
    "wait, slowdown, utilization.",
    "sam_worker.cli:up": "The whole cluster on this machine, in the foreground (SQLite, no Redis "
    "needed by default).",
    "sam_worker.cli:worker": "Run a Celery worker: a compile server or the worker of one wafer.",
}


# The server side's commands (entry points of the full sam-scheduler distribution), named so
# that the light client can say what to install instead of "No such command".
SERVER_COMMANDS = {
    name: "the sam-scheduler package"
    for name in ("server", "scheduler", "db", "worker", "up", "demo", "sim")
}


def load_client_command(name: str) -> click.Command:
    """Import the client command `name` (a key of CLIENT_COMMANDS)."""
    module_name, _, attribute = CLIENT_COMMANDS[name].partition(":")
    command: click.Command = getattr(importlib.import_module(module_name), attribute)
    return command


class SamGroup(click.Group):
    """The `sam` group: client commands, lazily loaded plugins, and user-facing error reports."""

    def __init__(
        self, *args: Any, find_plugins: Callable[[], dict[str, EntryPointLike]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._find_plugins = find_plugins
        self._plugins: dict[str, EntryPointLike] | None = None

    def _plugin_entry_points(self) -> dict[str, EntryPointLike]:
        if self._plugins is None:
            self._plugins = self._find_plugins()
        return self._plugins

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Client commands and plugin names, sorted."""
        names = set(super().list_commands(ctx)) | set(CLIENT_COMMANDS)
        return sorted(names | set(self._plugin_entry_points()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A client command, or the named plugin, imported now (once)."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        if cmd_name in CLIENT_COMMANDS:
            command = load_client_command(cmd_name)
            self.add_command(command, cmd_name)
            return command
        entry_point = self._plugin_entry_points().get(cmd_name)
        if entry_point is None:
            if cmd_name in SERVER_COMMANDS:  # the light client (sam-client) alone
                return unavailable_command(cmd_name, SERVER_COMMANDS[cmd_name], "not installed")
            return None
        command = load_plugin(cmd_name, entry_point)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's command list, with the short help of the client's and this project's own
        commands from the tables above: `sam --help` imports no command."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            text = self._known_short_help(name)
            if text is not None:
                # a bare command with that help: click's own shortening, nothing imported
                rows.append((name, click.Command(name, help=text).get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _known_short_help(self, name: str) -> str | None:
        if name in self.commands:  # added (and so imported) already: it speaks for itself
            return None
        if name in CLIENT_COMMANDS:
            return SHORT_HELP.get(name)
        entry_point = self._plugin_entry_points().get(name)
        return PLUGIN_SHORT_HELP.get(entry_point.value) if entry_point is not None else None

    def invoke(self, ctx: click.Context) -> object:
        """Run the subcommand; client errors become `error: ...` on stderr and exit status 1."""
        try:
            return super().invoke(ctx)
        except SamAPIError as exc:
            report_api_error(exc, ctx)
            ctx.exit(1)
        except SamClientError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


def report_api_error(exc: SamAPIError, ctx: click.Context) -> None:
    """Print `error: <title>: <detail>`, each field error, and a hint for auth failures."""
    for line in api_error_lines(exc, ctx.meta.get("sam.config")):
        click.echo(line, err=True)


def print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`sam --version`: the installed distribution, full (sam-scheduler) or light (sam-client)."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    for distribution in ("sam-scheduler", "sam-client"):
        try:
            click.echo(f"sam, version {version(distribution)} ({distribution})")
            break
        except PackageNotFoundError:
            continue
    else:
        click.echo("sam, version unknown (run from a source tree)")
    ctx.exit(0)


def build_cli(
    find_plugins: Callable[[], dict[str, EntryPointLike]] = discover_plugins,
) -> click.Group:
    """A fresh `sam` group; `find_plugins` lists the plugin entry points (tests pass fakes)."""

    @click.group(
        cls=SamGroup,
        find_plugins=find_plugins,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
        epilog="Exit status: 0 success, 1 the operation failed, 2 bad usage.",
    )
    @click.option(
        "--url",
        metavar="URL",
        help="Server URL (else SAM_URL, else ~/.config/sam/config.toml, else http://127.0.0.1:8000).",
    )
    @click.option(
        "--token", metavar="TOKEN", help="API token (else SAM_TOKEN, else the config file)."
    )
    @click.option(
        "--context",
        metavar="NAME",
        envvar="SAM_CONTEXT",
        help="Use this context of the config file (else SAM_CONTEXT, else its current-context).",
    )
    @click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=print_version,
        help="Show the version and exit.",
    )
    def sam(url: str | None, token: str | None, context: str | None) -> None:
        """SAM: submit and watch training jobs on shared wafer-scale machines."""

    return sam


cli = build_cli()


def main(argv: list[str] | None = None) -> None:
    """The `sam` console script."""
    cli.main(args=argv, prog_name="sam")
