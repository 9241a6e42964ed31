"""`sam admin`: tenants, their quotas, and users (admin token required)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from client.columns import (
    Column,
    columns_by_name,
    field,
    format_option,
    parse_format,
    render_selected,
)
from client.commands.options import (
    connection_options,
    echo_data,
    echo_message,
    echo_new_token,
    open_client,
    output_option,
    token_output_option,
)
from client.commands.tokens import token_group
from client.output import render_key_values, render_table

F = TypeVar("F", bound=Callable[..., object])
QUOTA_FIELDS = ("max_pes", "max_running_jobs", "max_queued_jobs", "max_storage_bytes", "share")
USAGE_FIELDS = ("running_jobs", "queued_jobs", "pes", "pe_seconds", "storage_bytes")
QUOTA_DEFAULTS = {"share": 1}  # an omitted limit means none; an omitted share means 1


def quota_options(func: F) -> F:
    """Add `--max-pes`, `--max-running-jobs`, `--max-queued-jobs` and `--share`."""
    func = click.option(
        "--share",
        type=click.FloatRange(min=0, min_open=True),
        help="Fair-share weight (default 1).",
    )(func)
    func = click.option(
        "--max-storage-bytes",
        type=click.IntRange(min=0),
        help="Cap on stored project and data set bytes (default: the server's).",
    )(func)
    func = click.option(
        "--max-queued-jobs", type=click.IntRange(min=0), help="Cap on jobs not yet ended."
    )(func)
    func = click.option(
        "--max-running-jobs", type=click.IntRange(min=0), help="Cap on jobs running at once."
    )(func)
    func = click.option(
        "--max-pes", type=click.IntRange(min=1), help="Cap on PEs held by running jobs."
    )(func)
    return func


def quota_from(options: dict[str, Any]) -> dict[str, object]:
    """The quota object with only the fields given (omitted fields mean no limit)."""
    return {key: options[key] for key in QUOTA_FIELDS if options.get(key) is not None}


@click.group()
def admin() -> None:
    """Administer tenants, users and tokens."""


admin.add_command(token_group)


@admin.group()
def tenant() -> None:
    """Tenants and their quotas."""


@tenant.command("create")
@click.argument("name")
@quota_options
@output_option
@connection_options
def create_tenant(name: str, output: str, url: str | None, token: str | None, **quota: Any) -> None:
    """Create tenant NAME (quota fields left out mean no limit)."""
    created = open_client(url, token).create_tenant(name, quota_from(quota))
    echo_message(f"created tenant {created.get('name', name)}")
    _print_tenant(created, output)


TENANT_COLUMNS = [
    Column("Name", lambda t: t.get("name")),
    *[Column(k, field(k, "quota")) for k in QUOTA_FIELDS],
    *[Column(k, field(k, "usage")) for k in USAGE_FIELDS],
]


@tenant.command("list")
@format_option(TENANT_COLUMNS, "the table below")
@output_option
@connection_options
def list_tenants(columns: str | None, output: str, url: str | None, token: str | None) -> None:
    """Every tenant with its quota and usage."""
    tenants = open_client(url, token).list_tenants()
    if output in ("json", "yaml"):
        echo_data(tenants, output)
        return
    if columns:
        selected = parse_format(columns, columns_by_name(TENANT_COLUMNS))
        click.echo(render_selected(selected, tenants))
        return
    rows = [
        [t.get("name"), *[(t.get("quota") or {}).get(k) for k in QUOTA_FIELDS], _usage_text(t)]
        for t in tenants
    ]
    click.echo(
        render_table(["NAME", "MAX_PES", "MAX_RUNNING", "MAX_QUEUED", "SHARE", "USAGE"], rows)
    )


@tenant.command("show")
@click.argument("name")
@output_option
@connection_options
def show_tenant(name: str, output: str, url: str | None, token: str | None) -> None:
    """One tenant with its quota and current usage."""
    _print_tenant(open_client(url, token).get_tenant(name), output)


@tenant.command("set-quota")
@click.argument("name")
@quota_options
@output_option
@connection_options
def set_quota(name: str, output: str, url: str | None, token: str | None, **quota: Any) -> None:
    """Replace tenant NAME's quota (fields left out mean no limit)."""
    _print_tenant(open_client(url, token).set_quota(name, quota_from(quota)), output)


def _print_tenant(data: dict[str, Any], output: str) -> None:
    if output in ("json", "yaml"):
        echo_data(data, output)
        return
    quota = data.get("quota") or {}
    pairs: list[tuple[str, Any]] = [("name", data.get("name"))]
    for key in QUOTA_FIELDS:
        value = quota.get(key)
        pairs.append((key, value if value is not None else QUOTA_DEFAULTS.get(key, "no limit")))
    click.echo(render_key_values([*pairs, ("usage", _usage_text(data))]))


def _usage_text(data: dict[str, Any]) -> str | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    return ", ".join(f"{key}={value}" for key, value in usage.items())


@admin.group()
def user() -> None:
    """Users and their tokens."""


@user.command("create")
@click.argument("tenant_name", metavar="TENANT")
@click.argument("name")
@click.option("--role", type=click.Choice(["user", "admin"]), default="user", show_default=True)
@token_output_option
@connection_options
def create_user(
    tenant_name: str, name: str, role: str, output: str, url: str | None, token: str | None
) -> None:
    """Create user NAME in TENANT and print its token (shown only this once)."""
    created = open_client(url, token).create_user(tenant_name, name, role)
    echo_message(
        f"created {created.get('role', role)} {created.get('name', name)} in tenant "
        f"{created.get('tenant', tenant_name)}; store the token now, it is shown only once"
    )
    echo_new_token(created, output)
