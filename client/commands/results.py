"""`sam metrics` and `sam report`: what a job measured."""

from __future__ import annotations

from typing import Any

import click

from client.commands.options import connection_options, echo_data, open_client, output_option
from client.output import render_key_values, render_table

METRIC_COLUMNS = ["STEP", "LOSS", "SIM_CYCLES", "SAMPLES/S", "ACCURACY"]
EPOCH_COLUMNS = ["EPOCH", "STEPS", "MEAN_LOSS", "ACCURACY"]


DEFAULT_LAST = 20  # the table's default: a long run has hundreds of thousands of steps
MAX_EPOCH_ROWS = 10


@click.command()
@click.argument("job_id")
@click.option(
    "--last",
    type=click.IntRange(min=1),
    metavar="N",
    help=f"Only the newest N steps (the table's default: {DEFAULT_LAST}).",
)
@click.option(
    "--every",
    type=click.IntRange(min=1),
    metavar="K",
    help="Only steps whose number is a multiple of K, and the newest (a whole run, sampled).",
)
@click.option("--all", "all_steps", is_flag=True, help="Every step (can be very long).")
@output_option
@connection_options
def metrics(
    job_id: str,
    last: int | None,
    every: int | None,
    all_steps: bool,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """Per-step loss, simulated cycles and throughput of a job.

    The table shows the newest 20 steps unless --last, --every or --all says otherwise; the
    server trims, so a run of 200,000 steps costs a few kilobytes. `-o json|yaml` gives every
    step unless --last or --every is given.
    """
    if all_steps and (last or every):
        raise click.UsageError("--all shows every step; leave out --last and --every")
    trimmed = output not in ("json", "yaml") and not (all_steps or last or every)
    if trimmed:
        last = DEFAULT_LAST
    data = open_client(url, token).metrics(job_id, last=last, every=every)  # trimmed by the server
    if output in ("json", "yaml"):
        echo_data(data, output)
        return
    steps = data.get("steps") or []
    if data.get("purged_at"):
        click.echo(
            f"the step metrics of {job_id} were deleted on {data['purged_at']} by the retention "
            "policy; the summary below remains",
            err=True,
        )
    shown = steps[-last:] if last and not every else steps  # an older server sends every step
    rows = [
        [
            s.get("step"),
            s.get("loss"),
            s.get("sim_cycles"),
            s.get("samples_per_sec"),
            s.get("accuracy"),
        ]
        for s in shown
    ]
    click.echo(render_table(METRIC_COLUMNS, rows))
    if trimmed and shown and shown[0].get("step", 0) > 0:
        click.echo(
            f"(the newest {len(shown)} steps, {shown[0]['step']}..{shown[-1]['step']}; "
            "--last N, --every K or --all for more)",
            err=True,
        )
    epochs = data.get("epochs") or []
    if epochs:
        cells = [
            [e.get("epoch"), e.get("steps"), e.get("mean_loss"), e.get("accuracy")]
            for e in epochs[-MAX_EPOCH_ROWS:]
        ]
        click.echo("\n" + render_table(EPOCH_COLUMNS, cells))
        if len(epochs) > MAX_EPOCH_ROWS:
            click.echo(f"(the newest {MAX_EPOCH_ROWS} of {len(epochs)} epochs)", err=True)
    hidden = ("steps", "job_id", "epochs")
    summary = [(key, value) for key, value in data.items() if key not in hidden]
    if summary:
        click.echo("\n" + render_key_values(summary))


@click.command()
@click.argument("job_id")
@output_option
@connection_options
def report(job_id: str, output: str, url: str | None, token: str | None) -> None:
    """A job's performance report: throughput, PE utilization and SRAM, compile summary.

    The table view flattens nested fields and summarizes long arrays (heatmaps) by their
    shape, minimum, mean and maximum; `-o json` gives every value.
    """
    data = open_client(url, token).report(job_id)
    if output in ("json", "yaml"):
        echo_data(data, output)
        return
    click.echo(render_key_values(flatten_for_people(data)))


def flatten_for_people(data: object, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as dotted keys; lists of numbers (or of such lists) as a short summary."""
    if isinstance(data, dict):
        pairs: list[tuple[str, Any]] = []
        for key, value in data.items():
            pairs += flatten_for_people(value, f"{prefix}.{key}" if prefix else str(key))
        return pairs
    if isinstance(data, list) and data:
        numbers = _numbers(data)
        if numbers is not None:
            shape = "x".join(str(n) for n in _shape(data))
            mean = sum(numbers) / len(numbers)
            return [
                (
                    prefix,
                    f"[{shape}] min {min(numbers):.4g}, mean {mean:.4g}, max {max(numbers):.4g}",
                )
            ]
        if len(data) <= 8:
            return [
                pair
                for i, item in enumerate(data)
                for pair in flatten_for_people(item, f"{prefix}[{i}]")
            ]
        return [(prefix, f"{len(data)} items (see -o json)")]
    return [(prefix or "value", data)]


def _numbers(data: list[Any]) -> list[float] | None:
    flat: list[float] = []
    for item in data:
        if isinstance(item, list):
            inner = _numbers(item)
            if inner is None:
                return None
            flat += inner
        elif isinstance(item, int | float) and not isinstance(item, bool):
            flat.append(float(item))
        else:
            return None
    return flat or None


def _shape(data: list[Any]) -> list[int]:
    return [len(data), *(_shape(data[0]) if data and isinstance(data[0], list) else [])]
