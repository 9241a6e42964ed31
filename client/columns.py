"""Custom columns for every listing: `--format jobid,state,elapsed%12` (sacct's and squeue -O's
habit; `--fields` is the same option). Names are case-insensitive; `%N` sets a column's width
(longer values are cut and end with `~`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from client.output import render_table

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class Column:
    """One column a listing can show: its name (also the header) and how to get its value."""

    name: str
    value: Callable[[dict[str, Any]], object]
    help: str = ""


@dataclass(frozen=True)
class Selected:
    column: Column
    width: int | None


def field(key: str, within: str | None = None) -> Callable[[dict[str, Any]], object]:
    """A column value: `item[key]`, or `item[within][key]` (None when absent)."""

    def value(item: Mapping[str, object]) -> object:
        source = (item.get(within) or {}) if within else item
        return source.get(key) if isinstance(source, dict) else None

    return value


def columns_by_name(columns: Sequence[Column]) -> dict[str, Column]:
    """`{NAME: column}` for a listing's columns."""
    return {c.name.upper(): c for c in columns}


def parse_format(text: str, available: Mapping[str, Column]) -> list[Selected]:
    """The columns `--format` names, in order; an unknown name is a usage error listing all."""
    selected = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, width = part.partition("%")
        column = available.get(name.upper())
        if column is None:
            raise click.BadParameter(
                f"unknown column {name!r}; choose from {', '.join(n.lower() for n in available)}",
                param_hint="--format",
            )
        if width and not width.isdigit():
            raise click.BadParameter(
                f"bad width {width!r} in {part!r}; write NAME%WIDTH, e.g. {name}%20",
                param_hint="--format",
            )
        selected.append(Selected(column, int(width) if width else None))
    if not selected:
        raise click.BadParameter("name at least one column", param_hint="--format")
    return selected


def render_selected(
    selected: Sequence[Selected], items: Sequence[dict[str, Any]], *, no_headers: bool = False
) -> str:
    """A table of the selected columns, each cell cut to its `%N` width."""
    rows = [[_fit(s.column.value(item), s.width) for s in selected] for item in items]
    return render_table([s.column.name for s in selected], rows, no_headers=no_headers)


def render_csv(
    selected: Sequence[Selected],
    items: Sequence[dict[str, Any]],
    *,
    no_headers: bool = False,
    delimiter: str = ",",
) -> str:
    """The selected columns as CSV (RFC 4180; empty cells for missing values); `delimiter="|"`
    gives sacct's --parsable2."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    if not no_headers:
        writer.writerow([s.column.name for s in selected])
    for item in items:
        writer.writerow(["" if (v := s.column.value(item)) is None else v for s in selected])
    return out.getvalue().rstrip("\n")


def _fit(value: object, width: int | None) -> object:
    if width is None or value is None:
        return value
    text = str(value)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "~"


def format_option(columns: Sequence[Column], default: str) -> Callable[[F], F]:
    """Add `--format/--fields COLUMNS` to a listing whose columns are `columns`."""
    names = ", ".join(c.name.lower() for c in columns)

    def decorate(func: F) -> F:
        return click.option(
            "--format",
            "--fields",
            "columns",
            metavar="COLUMNS",
            default=None,
            help=f"Comma-separated columns, NAME%WIDTH to set a width (default: {default}). "
            f"Columns: {names}.",
        )(func)

    return decorate
