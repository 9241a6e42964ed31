"""`sam submit`: send a job file and the files it names; optionally follow the job to its end."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from client.commands.options import (
    connection_options,
    declared_options,
    echo_data,
    echo_message,
    open_client,
)
from client.errors import SamAPIError, SamConnectionError
from client.fastpath import submitted_text, with_directives
from client.jobspec import load_job_file
from client.output import dump_data, format_progress
from client.project import human_bytes
from client.sdk import TERMINAL_STATES, SamClient
from client.submit_options import SUBMIT_OPTIONS, SUBMIT_OUTPUTS
from client.upload import QUIET_BELOW_BYTES, project_listing, sent_line, with_project


@click.command()
@click.argument("job_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@declared_options(
    SUBMIT_OPTIONS,
    config_file={"type": click.Path(exists=True, dir_okay=False, path_type=Path)},
    output={"type": click.Choice(SUBMIT_OUTPUTS), "default": "text", "show_default": True},
)
@click.option("--poll-interval", type=click.FloatRange(min=0.0), default=1.0, hidden=True)
@connection_options
def submit(
    job_file: Path,
    config_file: Path | None,
    wait: bool,
    parsable: bool,
    dry_run: bool,
    output: str,
    idempotency_key: str | None,
    allow_outside: bool,
    array: str | None,
    dependency: str | None,
    hold: bool,
    kill_invalid_depend: bool,
    no_project: bool,
    poll_interval: float,
    url: str | None,
    token: str | None,
) -> None:
    """Submit a job file (job.yaml) and the files it names.

    JOB_FILE's folder is the job's project: every file under it (binary too) is sent, except
    what .samignore and the built-in rules (.git, .venv, __pycache__, *.pyc) leave out, and the
    job sees it read-only at /job/src, its working directory (docs/projects.md). Files the spec
    names (model.file, data.file) are read relative to JOB_FILE; files outside its folder (../x,
    absolute paths, symlinks leading out) are refused unless --allow-outside is given. Prints
    `Submitted job ID to tenant T`; with --wait, exits 0 only if the job succeeded.
    """
    origins: dict[str, Path] | None = None if no_project else {}
    spec, files = load_job_file(
        job_file,
        config_file,
        allow_outside=allow_outside,
        on_outside=lambda field, path: echo_message(
            f"warning: {field}: uploading {path}, from outside the job file's folder"
        ),
        origins=origins,
    )
    spec = with_directives(spec, array, dependency, hold, kill_invalid_depend)
    if wait and spec.get("array") is not None:
        raise click.UsageError("--wait follows one job; for an array, watch `sam queue --array`")
    listing = None if origins is None else project_listing(job_file, origins)
    client = open_client(url, token)
    if dry_run:
        result = client.validate_job(spec, files)
        if listing is not None:
            result["project"] = {
                "files": [{"path": f.path, "size": f.size} for f in listing],
                "bytes": sum(f.size for f in listing),
            }
        _print_validation(result, output)
        return
    if listing is not None:
        spec, report = with_project(client, spec, listing)
        if report.sent_bytes >= QUIET_BELOW_BYTES:
            echo_message(sent_line(report))
    job = client.submit_job(spec, files, idempotency_key=idempotency_key or uuid.uuid4().hex)
    _print_submitted(job, output, parsable)
    if wait:
        final = follow_job(client, str(job["id"]), poll_interval_s=poll_interval)
        if final.get("state") != "succeeded":
            raise click.exceptions.Exit(1)


def _print_validation(result: dict[str, Any], output: str) -> None:
    if output != "text":
        echo_data(result, output)
        return
    project = result.get("project")
    if project is not None:
        click.echo(f"# project: {len(project['files'])} files, {human_bytes(project['bytes'])}")
        for entry in project["files"]:
            click.echo(f"#   {entry['path']}  {human_bytes(entry['size'])}")
    region = result.get("region") or {}
    shape = f"{region.get('rows')}x{region.get('cols')} PEs" if region else "no region"
    echo_message(f"job file is valid (region {shape}); nothing was submitted")
    click.echo(dump_data(result.get("spec", {}), "yaml"))


def _print_submitted(job: dict[str, Any], output: str, parsable: bool) -> None:
    if parsable:
        click.echo(job["id"])
    elif output != "text":
        echo_data(job, output)
    else:
        click.echo(submitted_text(job))


def follow_job(
    client: SamClient, job_id: str, *, poll_interval_s: float = 1.0
) -> dict[str, object]:
    """Stream the job's log to stderr until it ends (polling if the stream fails); the final job."""
    echo_message(f"following job {job_id} (Ctrl-C stops following; the job keeps going)")
    try:
        _stream_log_to_stderr(client, job_id)
        final = client.wait_for_job(
            job_id, poll_interval_s=poll_interval_s, on_update=_state_reporter(job_id)
        )
    except KeyboardInterrupt:
        echo_message(f"stopped following; job {job_id} keeps going (`sam logs -f {job_id}`)")
        raise click.exceptions.Exit(130) from None
    _report_outcome(final)
    return final


def _stream_log_to_stderr(client: SamClient, job_id: str) -> None:
    try:
        for event in client.follow_logs(job_id):
            if event.event == "log":
                echo_message(event.data)
            elif event.event == "end":
                return
    except SamConnectionError as exc:
        echo_message(f"warning: the log stream broke ({exc.reason}); polling the job instead")
    except SamAPIError as exc:
        echo_message(f"warning: no live log ({exc.summary()}); polling the job instead")


def _state_reporter(job_id: str) -> Callable[[dict[str, Any]], None]:
    last: dict[str, object] = {}

    def report(job: dict[str, Any]) -> None:
        """Print the job's state and step on stderr when either changed since the last poll."""
        progress = job.get("progress") or {}
        seen = (job.get("state"), progress.get("step"))
        if seen != last.get("seen") and job.get("state") not in TERMINAL_STATES:
            detail = format_progress(progress)
            echo_message(f"job {job_id}: {job.get('state')}" + (f", {detail}" if detail else ""))
        last["seen"] = seen

    return report


def _report_outcome(job: dict[str, Any]) -> None:
    state = job.get("state")
    error = job.get("error") or {}
    message = f"job {job.get('id')} {state}"
    if error:
        message += f": {error.get('kind')}: {error.get('message')}"
    echo_message(message)
