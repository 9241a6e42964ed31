"""Options shared by the client's subcommands, and the SamClient they configure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from client.config import resolve_config
from client.output import OUTPUT_FORMATS, dump_data
from client.sdk import SamClient
from client.submit_options import CONNECTION_OPTIONS

F = TypeVar("F", bound=Callable[..., object])


def declared_options(table: Any, **types: Mapping[str, object]) -> Callable[[F], F]:
    """Add the options a table of client.submit_options declares to a command, in its order;
    `types`: click's extra settings by parameter name (a type, a default)."""

    def decorate(func: F) -> F:
        for names, dest, metavar, help_text in reversed(table):
            settings: dict[str, Any] = {"help": help_text, **types.get(dest, {})}
            if metavar is None:
                settings["is_flag"] = True
            elif metavar:
                settings["metavar"] = metavar
            func = click.option(*names, dest, **settings)(func)
        return func

    return decorate


connection_options = declared_options(CONNECTION_OPTIONS)
"""Add `--url` and `--token` to a subcommand (they override the same options on `sam`)."""


def output_option(func: F) -> F:
    """Add `-o/--output table|wide|json|yaml` (json and yaml print the raw API objects)."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(OUTPUT_FORMATS),
        default="table",
        show_default=True,
        help="Output format; json and yaml print the API's objects unchanged.",
    )(func)


def token_output_option(func: F) -> F:
    """Add `-o/--output token|json|yaml` to a command that makes a token (see echo_new_token)."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["token", "json", "yaml"]),
        default="token",
        show_default=True,
        help="token: only the new token; json/yaml: the API object.",
    )(func)


def echo_new_token(created: Mapping[str, object], fmt: str) -> None:
    """Print a just-made token on stdout: the secret alone (`token`) or the API object."""
    if fmt == "token":
        click.echo(created["token"])
    else:
        echo_data(created, fmt)


def open_client(url: str | None = None, token: str | None = None) -> SamClient:
    """A SamClient for this invocation: subcommand flags, then `sam` flags, env, config file."""
    ctx = click.get_current_context()
    root = ctx.find_root().params
    config = resolve_config(
        url or root.get("url"), token or root.get("token"), context=root.get("context")
    )
    client = SamClient(config.url, config.token)
    ctx.call_on_close(client.close)
    ctx.meta["sam.config"] = config
    return client


def echo_data(data: Any, fmt: str) -> None:
    """Print raw API data on stdout as `json` or `yaml`."""
    click.echo(dump_data(data, fmt))


def echo_message(message: str) -> None:
    """Print a message for people on stderr."""
    click.echo(message, err=True)
