"""`sam config`: named contexts (server URL + token) in the client config file, kubectl style."""

from __future__ import annotations

import click

from client.columns import Column, columns_by_name, format_option, parse_format, render_selected
from client.commands.options import echo_data, echo_message
from client.config import (
    config_contexts,
    config_file_path,
    read_config_document,
    write_config_file,
)


@click.group("config")
def config_group() -> None:
    """Contexts in ~/.config/sam/config.toml: set-context, use-context, get-contexts."""


@config_group.command(
    "show", context_settings={"ignore_unknown_options": True, "help_option_names": []}
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def show(args: tuple[str, ...]) -> None:
    """Every effective setting of the SAM server on this machine and where it came from (the
    environment variable, the settings file or the default); needs the server packages."""
    from client.plugins import CONFIG_GROUP, discover_plugins, load_plugin

    entry_point = discover_plugins(CONFIG_GROUP).get("show")
    if entry_point is None:
        raise click.ClickException(
            "`sam config show` shows the server's settings and needs the SAM server packages; "
            "install the full `sam-scheduler` package"
        )
    command = load_plugin("config show", entry_point)
    command.main(list(args), prog_name="sam config show", standalone_mode=True)


@config_group.command("set-context")
@click.argument("name")
@click.option("--url", metavar="URL", help="The server URL of this context.")
@click.option("--token", metavar="TOKEN", help="The API token of this context.")
def set_context(name: str, url: str | None, token: str | None) -> None:
    """Create context NAME or change its URL/token (the file stays readable by you only)."""
    path = config_file_path()
    document = read_config_document(path)
    contexts = config_contexts(document, path)
    settings = {**contexts.get(name, {})}
    settings.update({k: v for k, v in (("url", url), ("token", token)) if v})
    if not settings.get("url"):
        raise click.UsageError(f"context {name!r} needs a server: pass --url URL")
    contexts[name] = settings
    write_config_file(path, {**document, "contexts": contexts})
    echo_message(f"context {name!r} saved in {path}")


@config_group.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context (every later `sam` call uses its URL and token)."""
    path = config_file_path()
    document = read_config_document(path)
    contexts = config_contexts(document, path)
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none yet"
        raise click.UsageError(
            f"no context {name!r} (known: {known}); add it with "
            f"`sam config set-context {name} --url URL --token TOKEN`"
        )
    write_config_file(path, {**document, "current-context": name})
    echo_message(f'switched to context "{name}"')


@config_group.command("current-context")
def current_context() -> None:
    """Print the current context's name (exit 1 if none is set)."""
    name = read_config_document(config_file_path()).get("current-context")
    if not name:
        echo_message("no current context; `sam config use-context NAME` sets one")
        raise click.exceptions.Exit(1)
    click.echo(name)


CONTEXT_COLUMNS = [
    Column("Current", lambda c: "*" if c["current"] else ""),
    Column("Name", lambda c: c["name"]),
    Column("URL", lambda c: c["url"]),
    Column("Token", lambda c: c["token"]),
]


@config_group.command("get-contexts")
@format_option(CONTEXT_COLUMNS, "current,name,url,token")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
def get_contexts(columns: str | None, output: str) -> None:
    """The contexts, the current one marked `*`; tokens are shown by their first characters."""
    path = config_file_path()
    document = read_config_document(path)
    current = document.get("current-context")
    rows = [
        {
            "name": name,
            "current": name == current,
            "url": table.get("url"),
            "token": _masked(table.get("token")),
        }
        for name, table in sorted(config_contexts(document, path).items())
    ]
    if output != "table":
        echo_data(rows, output)
        return
    selected = parse_format(columns or "current,name,url,token", columns_by_name(CONTEXT_COLUMNS))
    click.echo(render_selected(selected, rows))


def _masked(token: object) -> str | None:
    if not isinstance(token, str) or not token:
        return None
    return token[:8] + "…"
