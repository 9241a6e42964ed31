"""`sam data`: a tenant's data sets: put (a file or a folder, chunked and resumable), ls, rm, du.

A job names a data set in `data.dataset` and reads it read-only at /datasets/NAME in the sandbox
that runs make_batch (docs/data.md). Only the tenant's own jobs can name its data sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from client.commands.options import (
    connection_options,
    echo_data,
    echo_message,
    open_client,
    output_option,
)
from client.output import render_table
from client.project import ProjectFile, human_bytes, list_project
from client.upload import UploadReport, upload_dataset


@click.group("data")
def data_group() -> None:
    """Data sets: upload once, read from many jobs at /datasets/NAME."""


@data_group.command("put")
@click.argument("name")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@connection_options
def put(name: str, path: Path, url: str | None, token: str | None) -> None:
    """Upload PATH (a file or a folder) as data set NAME, replacing one of that name.

    A folder is sent as `sam submit` sends a project (.samignore applies); a file becomes the
    data set's one file. Run again after an interruption: only what is missing is sent."""
    if path.is_dir():
        files = list_project(path)
    else:
        files = [ProjectFile(path.name, path, path.stat().st_size)]
    client = open_client(url, token)
    report = UploadReport()
    result = upload_dataset(client, name, files, report)
    verb = "replaced" if result.get("replaced") else "stored"
    echo_message(
        f"data set {name} {verb}: {result['files']} files, {human_bytes(result['bytes'])} "
        f"(sent {human_bytes(report.sent_bytes)}); jobs read it at /datasets/{name}"
    )


@data_group.command("ls")
@output_option
@connection_options
def ls(output: str, url: str | None, token: str | None) -> None:
    """Your tenant's data sets and the shared ones it may use."""
    listing = open_client(url, token).call("GET", "/datasets")
    if output in ("json", "yaml"):
        echo_data(listing, output)
        return
    rows = [_row(d) for d in listing["datasets"]]
    click.echo(render_table(("NAME", "FILES", "SIZE", "OWNER", "PATH IN A JOB"), rows))


def _row(entry: dict[str, Any]) -> list[Any]:
    size = None if entry.get("bytes") is None else human_bytes(entry["bytes"])
    owner = "shared" if entry.get("shared") else "tenant"
    return [entry["name"], entry.get("files"), size, owner, f"/datasets/{entry['name']}"]


@data_group.command("rm")
@click.argument("name")
@connection_options
def rm(name: str, url: str | None, token: str | None) -> None:
    """Delete data set NAME (jobs naming it afterwards are refused at submit)."""
    result = open_client(url, token).call("DELETE", f"/datasets/{name}")
    echo_message(f"data set {name} deleted; {human_bytes(result['freed_bytes'])} freed")


@data_group.command("du")
@output_option
@connection_options
def du(output: str, url: str | None, token: str | None) -> None:
    """Your tenant's stored bytes (data sets and projects) against its storage limit."""
    listing = open_client(url, token).call("GET", "/datasets")
    storage = listing["storage"]
    if output in ("json", "yaml"):
        echo_data(storage, output)
        return
    rows: list[list[Any]] = [
        [d["name"], human_bytes(d["bytes"])] for d in listing["datasets"] if not d.get("shared")
    ]
    rows.append([f"{storage['projects']} projects", human_bytes(storage["project_bytes"])])
    click.echo(render_table(("WHAT", "SIZE"), rows))
    share = storage["bytes"] / storage["limit"] if storage["limit"] else 1.0
    click.echo(
        f"stored: {human_bytes(storage['bytes'])} of {human_bytes(storage['limit'])} "
        f"({share:.0%}); files shared by data sets and projects are stored once"
    )
