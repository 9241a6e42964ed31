"""`sam run train.py`: a Runner script (`from sam import Runner`, docs/runner.md) as a SAM job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from client.commands.options import connection_options
from client.config import resolve_config


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--wait", is_flag=True, help="Follow the job: its log, then its losses and weights.")
@click.option("-J", "--job-name", help="The job's name (default: the script's path).")
@click.option(
    "--region",
    metavar="ROWSxCOLS",
    help="The rectangle of PEs to ask for, e.g. 16x16 (default: the job spec's, 8x8).",
)
@click.option("-t", "--time-limit", metavar="TIME", help="Wall time limit, e.g. 30m (default 30m).")
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default="this Python",
    help="The Python that runs the script on this machine (it imports torch).",
)
@connection_options
def run(
    script: Path,
    args: tuple[str, ...],
    wait: bool,
    job_name: str | None,
    region: str | None,
    time_limit: str | None,
    python: str,
    url: str | None,
    token: str | None,
) -> None:
    """Submit a Runner script (train.py) and its folder as a job; --wait follows it.

    The script runs here, in its own folder, as `python SCRIPT ARGS`, up to `runner.train(...)`:
    that call sends the folder (as `sam submit` sends a project) with the script as the job's
    entry, prints the job id, and with --wait prints the job's log (a line per epoch), then
    returns the losses and the trained weights to the script. On the cluster the same script
    runs in the sandboxes: its train_step is compiled whole for the wafer and its
    train_data_fn() feeds it. Exits with the script's status.
    """
    root = click.get_current_context().find_root().params
    config = resolve_config(
        url or root.get("url"), token or root.get("token"), context=root.get("context")
    )
    spec: dict[str, object] = {}
    if job_name:
        spec["name"] = job_name
    resources: dict[str, object] = {}
    if region:
        resources["region"] = _region(region)
    if time_limit:
        resources["time_limit"] = time_limit
    if resources:
        spec["resources"] = resources
    env = dict(os.environ)
    env.update(
        SAM_URL=config.url,
        SAM_RUNNER="remote",
        SAM_RUN_WAIT="1" if wait else "0",
        SAM_RUN_SPEC=json.dumps(spec),
    )
    if config.token:
        env["SAM_TOKEN"] = config.token
    script = script.resolve()
    _check_python(python, script, env)
    try:
        done = subprocess.run([python, str(script), *args], cwd=script.parent, env=env)
    except OSError as exc:
        raise click.ClickException(f"cannot start {python}: {exc.strerror}") from None
    raise click.exceptions.Exit(done.returncode)


# Run by the chosen Python before the script: exit 3 without torch, 4 without the sam package
# (find_spec locates a package without importing it: no torch start-up cost).
_PROBE = (
    "import importlib.util as u, sys\n"
    "sys.exit(3 if u.find_spec('torch') is None else 4 if u.find_spec('sam') is None else 0)"
)


def _check_python(python: str, script: Path, env: dict[str, str]) -> None:
    """Say in one line, before the script starts, that this Python cannot run it.

    torch is needed here, not only on SAM: the script runs on this machine up to
    runner.train(...), importing torch, building its model and reading len(train_data_fn())
    (the job's epochs and batch size come from that run); only its train_step is captured on
    SAM, in the compile sandbox."""
    try:
        probe = subprocess.run([python, "-c", _PROBE], cwd=script.parent, env=env)
    except OSError as exc:
        raise click.ClickException(f"cannot start {python}: {exc.strerror}") from None
    if probe.returncode == 3:
        raise click.ClickException(
            f"{python} has no torch, and {script.name} runs here up to runner.train(...) (it "
            "imports torch and builds its model; SAM compiles only its train_step): install "
            "torch for it (pip install torch) or pass --python a Python that has it"
        )
    if probe.returncode == 4:
        raise click.ClickException(
            f"{python} has no `sam` package for {script.name}'s `from sam import Runner`: "
            "install SAM's client for it (pip install ./client) or pass --python another"
        )


def _region(text: str) -> dict[str, int]:
    rows, sep, cols = text.lower().partition("x")
    if not sep or not rows.strip().isdigit() or not cols.strip().isdigit():
        raise click.BadParameter(f"{text!r} is not ROWSxCOLS, e.g. 16x16", param_hint="--region")
    return {"rows": int(rows), "cols": int(cols)}
