"""`sam cluster` (wafers, their regions and an occupancy map) and `sam whoami`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from client.columns import Column, columns_by_name, format_option, parse_format, render_selected
from client.commands.options import connection_options, echo_data, open_client, output_option
from client.occupancy import render_wafer_map
from client.output import render_key_values, render_table

WAFER_COLUMNS = ["WAFER", "ARCH", "SIZE", "STATE", "FREE_PES", "USED", "JOBS", "FRAG"]


def _wafer_column(index: int) -> Callable[[dict[str, Any]], Any]:
    return lambda wafer: wafer_row(wafer)[index]


CLUSTER_COLUMNS = [
    *[Column(name, _wafer_column(i)) for i, name in enumerate(WAFER_COLUMNS)],
    Column("Rows", lambda w: w.get("rows")),
    Column("Cols", lambda w: w.get("cols")),
    Column(
        "Jobs_IDs",
        lambda w: (
            ",".join(str(a.get("job_id") or "(hidden)") for a in w.get("allocations") or []) or None
        ),
    ),
]


@click.command()
@click.option("--no-map", is_flag=True, help="Only the table, without occupancy maps.")
@format_option(CLUSTER_COLUMNS, ",".join(WAFER_COLUMNS).lower())
@output_option
@connection_options
def cluster(
    no_map: bool, columns: str | None, output: str, url: str | None, token: str | None
) -> None:
    """Wafers, the regions jobs hold on them, and compile servers (--format: the wafers only)."""
    data = open_client(url, token).cluster()
    if output in ("json", "yaml"):
        echo_data(data, output)
        return
    wafers = data.get("wafers") or []
    if columns:
        selected = parse_format(columns, columns_by_name(CLUSTER_COLUMNS))
        click.echo(render_selected(selected, wafers))
        return
    click.echo(render_table(WAFER_COLUMNS, [wafer_row(w) for w in wafers]))
    if output == "wide":
        click.echo(
            "\n"
            + render_table(
                ["WAFER", "JOBID", "TENANT", "REGION"],
                [allocation_row(w, a) for w in wafers for a in w.get("allocations") or []],
            )
        )
    if not no_map:
        for wafer in wafers:
            click.echo("\n" + render_wafer_map(wafer))
    click.echo("\n" + compile_servers_text(data.get("compile_servers") or []))


def wafer_row(wafer: dict[str, Any]) -> list[Any]:
    """One table row: id, arch, size, state, free PEs, percent used, number of jobs, and
    fragmentation (1 - largest free rectangle / free PEs; absent from older servers)."""
    rows, cols = int(wafer.get("rows") or 0), int(wafer.get("cols") or 0)
    total = rows * cols
    free = wafer.get("free_pes")
    used = (
        f"{100.0 * (total - free) / total:.1f}%"
        if total and isinstance(free, int | float)
        else None
    )
    return [
        wafer.get("id"),
        wafer.get("arch"),
        f"{rows}x{cols}",
        wafer.get("state"),
        free,
        used,
        len(wafer.get("allocations") or []),
        wafer.get("fragmentation"),
    ]


def allocation_row(wafer: dict[str, Any], alloc: dict[str, Any]) -> list[Any]:
    """One row of the wide allocation table."""
    region = f"{alloc.get('row')},{alloc.get('col')}+{alloc.get('rows')}x{alloc.get('cols')}"
    return [wafer.get("id"), alloc.get("job_id") or "(hidden)", alloc.get("tenant"), region]


def compile_servers_text(servers: list[Any]) -> str:
    """Compile servers as a table when the API gives objects, else a count."""
    if servers and all(isinstance(s, dict) for s in servers):
        keys = list(dict.fromkeys(key for s in servers for key in s))
        return render_table([k.upper() for k in keys], [[s.get(k) for k in keys] for s in servers])
    return f"compile servers: {len(servers)}"


@click.command()
@output_option
@connection_options
def whoami(output: str, url: str | None, token: str | None) -> None:
    """The principal the token belongs to: name, tenant, role."""
    me = open_client(url, token).whoami()
    if output in ("json", "yaml"):
        echo_data(me, output)
        return
    click.echo(render_key_values([(key.capitalize(), value) for key, value in me.items()]))
