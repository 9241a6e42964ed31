"""`sam admin token` (also `sam token`): list, revoke and rotate API tokens.

Anyone manages their own tokens; a tenant admin those of its tenant; the cluster admin all.
A token's secret is printed only by `rotate` (and `sam admin user create`), never by `list`.
"""

from __future__ import annotations

import click

from client.columns import Column, columns_by_name, format_option, parse_format, render_selected
from client.commands.options import (
    connection_options,
    echo_data,
    echo_message,
    echo_new_token,
    open_client,
    output_option,
    token_output_option,
)

COLUMNS = ("id", "prefix", "tenant", "user", "created_at", "last_used_at", "revoked_at")


def _token_column(name: str) -> Column:
    return Column(name.upper(), lambda row: _cell(name, row.get(name)))


TOKEN_COLUMNS = [_token_column(c) for c in (*COLUMNS, "bootstrap")]


@click.group("token")
def token_group() -> None:
    """API tokens: list, revoke, rotate (secrets are shown only when made)."""


@token_group.command("list")
@click.option("--tenant", "tenant_name", help="Only this tenant's tokens (cluster admin).")
@click.option("--user", "user_name", help="Only this user's tokens.")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@format_option(TOKEN_COLUMNS, ",".join(COLUMNS))
@output_option
@connection_options
def list_tokens(
    tenant_name: str | None,
    user_name: str | None,
    include_revoked: bool,
    columns: str | None,
    output: str,
    url: str | None,
    token: str | None,
) -> None:
    """The tokens you manage: id, prefix, owner, created, last used (never the secret)."""
    rows = open_client(url, token).list_tokens(
        tenant=tenant_name, user=user_name, include_revoked=include_revoked
    )
    if output in ("json", "yaml"):
        echo_data(rows, output)
        return
    selected = parse_format(columns or ",".join(COLUMNS), columns_by_name(TOKEN_COLUMNS))
    click.echo(render_selected(selected, rows))


def _cell(column: str, value: object) -> object:
    """Timestamps (the `*_at` columns) to the second; None as '-'."""
    if value is None:
        return "-"
    if column.endswith("_at") and isinstance(value, str):
        return value[:19].replace("T", " ")
    return value


@token_group.command("revoke")
@click.argument("token_ids", metavar="ID...", nargs=-1, required=True, type=int)
@connection_options
def revoke(token_ids: tuple[int, ...], url: str | None, token: str | None) -> None:
    """Revoke tokens by id (`sam admin token list` shows ids); calls with them get 401."""
    client = open_client(url, token)
    for token_id in token_ids:
        gone = client.revoke_token(token_id)
        echo_message(f"revoked token {gone['id']} ({gone['prefix']}…) of {gone['user']}")


@token_group.command("rotate")
@click.argument("token_id", metavar="ID", type=int)
@token_output_option
@connection_options
def rotate(token_id: int, output: str, url: str | None, token: str | None) -> None:
    """Revoke token ID and print its replacement (shown only this once)."""
    new = open_client(url, token).rotate_token(token_id)
    echo_message(
        f"revoked token {token_id}; new token {new['id']} for {new['user']}: "
        "store it now, it is shown only once"
    )
    echo_new_token(new, output)
