"""`sam sim`: replay an SWF trace through a scheduling policy (docs/contract.md section 3).

A standalone click command, loaded by the `sam` CLI through the `sam.commands` entry point.
"""

from __future__ import annotations

import json
import sys

import click

from sam_server.config import arch_grid
from sam_server.replay.metrics import SimResult
from sam_server.replay.oned import simulate_oned
from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceFormatError, TraceJob, read_swf, scale_interarrival
from sam_server.scheduling.model import PolicyConfig, easy_config, fcfs_config
from sam_server.scheduling.profiles import PROFILES, profile_named

POLICIES = {"fcfs": fcfs_config, "easy": easy_config, "sam": PolicyConfig}
"""The policies `sam sim` replays through `plan`, by name."""
ONED = "oned-easy"
"""The geometry-free baseline (`oned.simulate_oned`), replayed beside them."""


def replay(
    jobs: list[TraceJob], spec: ClusterSpec, policy: str, profile: str | None = None
) -> SimResult:
    """Replay `jobs` under `policy` (a name of POLICIES, or "oned-easy") on `spec`, or under
    the scheduling profile `profile` (a name of `profiles.PROFILES`) when given."""
    if profile is not None:
        return simulate(jobs, spec, PolicyConfig(), profile, profile=profile_named(profile))
    if policy == ONED:
        return simulate_oned(jobs, spec.wafers, spec.rows, spec.cols, spec.pes_per_proc)
    return simulate(jobs, spec, POLICIES[policy](), policy)


def _auto_pes_per_proc(max_procs: int, spec: ClusterSpec) -> int:
    """PEs per trace processor so that the trace's largest job fills one wafer."""
    return max(1, (spec.rows * spec.cols) // max(1, max_procs))


@click.command("sim")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--wafers", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--wafer-rows", type=click.IntRange(min=1), help="[default: a whole WSE-2 fabric's rows]"
)
@click.option(
    "--wafer-cols", type=click.IntRange(min=1), help="[default: a whole WSE-2 fabric's columns]"
)
@click.option(
    "--pes-per-proc",
    type=click.IntRange(min=1),
    default=None,
    help="PEs per trace processor [default: the trace's largest job fills one wafer]",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="replay the first N jobs")
@click.option(
    "--policy", type=click.Choice([*sorted(POLICIES), ONED]), default="sam", show_default=True
)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default=None,
    help="replay this scheduling profile (docs/architecture.md) instead of --policy",
)
@click.option(
    "--interarrival",
    type=click.FloatRange(min=0.0, min_open=True),
    default=1.0,
    show_default=True,
    help="multiply the gaps between submits (0.5 = twice the load)",
)
@click.option(
    "--moldable",
    type=click.FloatRange(min=0.0, max=0.5),
    default=0.0,
    show_default=True,
    help="let trace jobs start on up to this fraction fewer PEs, running longer (an experiment: "
    "live jobs never shrink)",
)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def sim(
    trace: str,
    wafers: int,
    wafer_rows: int | None,
    wafer_cols: int | None,
    pes_per_proc: int | None,
    limit: int | None,
    policy: str,
    profile: str | None,
    interarrival: float,
    moldable: float,
    output: str,
) -> None:
    """Replay TRACE (.swf or .swf.gz) on simulated wafers; print wait, slowdown, utilization."""
    try:
        jobs = read_swf(trace, limit)
    except (TraceFormatError, OSError) as exc:
        click.echo(f"error: cannot read {trace}: {exc}", err=True)
        sys.exit(1)
    jobs = scale_interarrival(jobs, interarrival)
    full_rows, full_cols = arch_grid("wse2")  # as the cluster file sizes a wafer without a size
    wafer_rows, wafer_cols = wafer_rows or full_rows, wafer_cols or full_cols
    spec = ClusterSpec(wafers, wafer_rows, wafer_cols, 1)
    if pes_per_proc is None:
        pes_per_proc = _auto_pes_per_proc(max((j.procs for j in jobs), default=1), spec)
    spec = ClusterSpec(wafers, wafer_rows, wafer_cols, pes_per_proc, moldable)
    result = replay(jobs, spec, policy, profile)
    figures = result.as_dict()
    if output == "json":
        click.echo(json.dumps(figures))
        return
    click.echo(
        f"# {len(jobs)} jobs on {wafers} x {wafer_rows}x{wafer_cols} PEs, "
        f"{pes_per_proc} PEs per processor",
        err=True,
    )
    for key, value in figures.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        click.echo(f"{key:<22} {shown}")


if __name__ == "__main__":
    sim()
