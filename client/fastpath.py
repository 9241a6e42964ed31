"""`sam submit` without click: the command a sweep runs a thousand times in a shell loop.

Every `sam` call is a new Python process, and importing click (with PyYAML and the rest of the
command table's world) was most of a submit's CPU. The console script (client.entry) hands a
`sam [--url U] [--token T] [--context C] submit JOB_FILE [options]` call here first. This module
reads the same options as client.commands.submit, does the same work through the same functions
(client.jobspec, client.config, client.sdk) and prints the same lines. Whatever it does not
handle (--wait, --dry-run, -o yaml, --help, a missing job file, an unknown or malformed option)
it declines before anything is sent or printed, and click's full command runs instead, with its
usage errors.
"""

from __future__ import annotations

import os
import sys

from client.submit_options import CONNECTION_OPTIONS, SUBMIT_OPTIONS

TYPE_CHECKING = False  # typing's import is spared on this path
if TYPE_CHECKING:
    from typing import Any

    from client.config import ClientConfig
    from client.errors import SamAPIError

# Options of `sam` itself before the subcommand, and of `sam submit` (client.submit_options
# declares them for both paths: click's command and this one).
GLOBAL_VALUES = {"--url": "url", "--token": "token", "--context": "context"}
SUBMIT_VALUES = {
    name: dest
    for names, dest, metavar, _ in CONNECTION_OPTIONS + SUBMIT_OPTIONS
    if metavar is not None
    for name in names
}
SUBMIT_FLAGS = {
    name: dest for names, dest, metavar, _ in SUBMIT_OPTIONS if metavar is None for name in names
}
CLICK_ONLY = ("wait", "dry_run")  # following a job, validating: click's command does those
QUICK_OUTPUTS = ("text", "json")  # yaml output needs PyYAML's dumper: click's path


def parse_submit_args(argv: list[str]) -> dict[str, Any] | None:
    """The options of a `sam ... submit ...` command line, or None when this path declines it."""
    found: dict[str, Any] = {}
    top: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "submit":
        i = _take(argv, i, GLOBAL_VALUES, {}, top)
        if i < 0:
            return None
    if i == len(argv):
        return None
    i += 1
    positional: list[str] = []
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and arg != "-":
            i = _take(argv, i, SUBMIT_VALUES, SUBMIT_FLAGS, found)
            if i < 0:
                return None
        else:
            positional.append(arg)
            i += 1
    if len(positional) != 1 or found.get("output", "text") not in QUICK_OUTPUTS:
        return None
    if any(found.get(dest) for dest in CLICK_ONLY):
        return None
    for key in ("url", "token"):  # the subcommand's flag wins over sam's own
        found[key] = found.get(key) or top.get(key)
    found["context"] = top.get("context") or None  # else resolve_config reads SAM_CONTEXT
    found["job_file"] = positional[0]
    for key in ("job_file", "config_file"):  # click.Path(exists=True, dir_okay=False)
        path = found.get(key)
        if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            return None
    return found


def _take(
    argv: list[str], i: int, values: dict[str, str], flags: dict[str, str], into: dict[str, Any]
) -> int:
    """Read the option at argv[i] into `into`; the next index, or -1 to decline."""
    arg = argv[i]
    name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
    if name in flags and not eq:
        into[flags[name]] = True
        return i + 1
    if name not in values:
        return -1  # unknown, combined short flags (-Ha), --help, --: click explains
    if eq:
        value = inline
    elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
        value = argv[i + 1]
        i += 1
    else:
        return -1
    into[values[name]] = value
    return i + 1


def with_directives(
    spec: dict[str, Any],
    array: str | None,
    dependency: str | None,
    hold_it: bool,
    kill_invalid_depend: bool,
) -> dict[str, object]:
    """The spec with the command line's sbatch-like options (they win over the file's keys)."""
    extra: dict[str, Any] = {"array": array, "dependency": dependency}
    extra = {k: v for k, v in extra.items() if v is not None}
    if hold_it:
        extra["hold"] = True
    if kill_invalid_depend:
        extra["kill_invalid_depend"] = True
    return {**spec, **extra}


def submitted_text(job: dict[str, Any]) -> str:
    """`Submitted job ID to tenant T` (or the array's form): `sam submit`'s text output."""
    if job.get("array"):
        tasks = job["array"].get("tasks")
        return f"Submitted array job {job['id']} ({tasks} tasks) to tenant {job.get('tenant', '-')}"
    return f"Submitted job {job['id']} to tenant {job.get('tenant', '-')}"


def api_error_lines(exc: SamAPIError, config: ClientConfig | None) -> list[str]:
    """`error: <title>: <detail>`, each field error, and a hint for auth failures (stderr)."""
    lines = [f"error: {exc.summary()}"]
    lines += [f"  {line}" for line in exc.field_messages() if line != exc.detail]
    if exc.status == 401 and config is not None:
        if config.token is None:
            from client.config import config_file_path

            lines.append(
                "hint: no token configured; pass --token, set SAM_TOKEN, run `sam login`, or "
                f'put token = "..." in {config_file_path()}'
            )
        else:
            lines.append(f"hint: the token from {config.token_source} was refused")
    return lines


def submit_quickly(argv: list[str]) -> int | None:
    """Run `sam submit` for `argv` and return its exit status; None: not handled here (nothing
    was sent or printed), run click's command instead."""
    args = parse_submit_args(argv)
    if args is None:
        return None
    from pathlib import Path

    from client.config import resolve_config
    from client.errors import SamAPIError, SamClientError
    from client.jobspec import load_job_file
    from client.sdk import SamClient

    config = None
    try:
        config_file = args.get("config_file")
        origins: dict[str, Path] | None = None if args.get("no_project") else {}
        spec, files = load_job_file(
            Path(args["job_file"]),
            None if config_file is None else Path(config_file),
            allow_outside=bool(args.get("allow_outside")),
            on_outside=lambda field, path: _stderr(
                f"warning: {field}: uploading {path}, from outside the job file's folder"
            ),
            origins=origins,
        )
        spec = with_directives(
            spec,
            args.get("array"),
            args.get("dependency"),
            bool(args.get("hold")),
            bool(args.get("kill_invalid_depend")),
        )
        config = resolve_config(args["url"], args["token"], context=args["context"])
        with SamClient(config.url, config.token) as client:
            if origins is not None:
                from client.upload import (
                    QUIET_BELOW_BYTES,
                    project_listing,
                    sent_line,
                    with_project,
                )

                listing = project_listing(Path(args["job_file"]), origins)
                spec, report = with_project(client, spec, listing)
                if report.sent_bytes >= QUIET_BELOW_BYTES:
                    _stderr(sent_line(report))
            job = client.submit_job(spec, files, idempotency_key=args.get("idempotency_key"))
    except SamAPIError as exc:
        _stderr("\n".join(api_error_lines(exc, config)))
        return 1
    except SamClientError as exc:
        _stderr(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _stderr("\nAborted!")  # click's words for an interrupted command
        return 1
    if args.get("parsable"):
        text = str(job["id"])
    elif args.get("output") == "json":
        from client.output import dump_data

        text = dump_data(job, "json")
    else:
        text = submitted_text(job)
    try:
        _stdout(text)
    except BrokenPipeError:  # `sam submit ... | head -0`: as click's main, no traceback, status 1
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _stdout(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
