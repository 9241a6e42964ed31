"""`sam fetch`: download a job's final weights, checkpoints and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from client.commands.options import connection_options, echo_message, open_client
from client.sdk import SamClient


@click.command()
@click.argument("job_id")
@click.option(
    "--checkpoint",
    "step",
    type=click.IntRange(min=1),
    metavar="STEP",
    help="Fetch only the checkpoint of this step (steps done), not the final weights.",
)
@click.option(
    "-d",
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write (default: ./JOB_ID).",
)
@connection_options
def fetch(
    job_id: str, step: int | None, directory: Path | None, url: str | None, token: str | None
) -> None:
    """Download a job's results: weights.pt (a torch state_dict under the model's own names;
    `torch.load(path, weights_only=True)`), checkpoints/step-N.npz and report.json.

    Prints each file written. Exits 1 if the job has nothing to fetch yet.
    """
    client = open_client(url, token)
    target = directory or Path(job_id)
    listing = client.artifacts(job_id)
    wanted = _wanted(listing, step)
    if not wanted:
        raise click.ClickException(_nothing_message(job_id, listing, step))
    for name, source in wanted:
        size = client.download(source, target / name)
        click.echo(str(target / name))
        echo_message(f"{name}: {size} bytes")
    _write_report(client, job_id, target)


def _wanted(listing: dict[str, Any], step: int | None) -> list[tuple[str, str]]:
    """(file name under the target folder, API path) of each file to download."""
    checkpoints = listing.get("checkpoints") or []
    if step is not None:
        return [
            (f"checkpoints/step-{c['step']:08d}.npz", c["url"])
            for c in checkpoints
            if c["step"] == step
        ]
    files = [(f"checkpoints/step-{c['step']:08d}.npz", c["url"]) for c in checkpoints]
    if listing.get("weights"):
        files.insert(0, ("weights.pt", listing["weights"]["url"]))
    return files


def _nothing_message(job_id: str, listing: dict[str, Any], step: int | None) -> str:
    have = [c["step"] for c in listing.get("checkpoints") or []]
    if step is not None:
        return f"job {job_id} has no checkpoint of step {step}; it has {have or 'none'}"
    return (
        f"job {job_id} ({listing.get('state')}) has no weights or checkpoints yet; weights are "
        "written when a training job succeeds"
    )


def _write_report(client: SamClient, job_id: str, target: Path) -> None:
    path = target / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(client.report(job_id), indent=2, sort_keys=True) + "\n")
    click.echo(str(path))
