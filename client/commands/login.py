"""`sam login`: check a token against the server and save it in the client config file."""

from __future__ import annotations

import click

from client.commands.options import echo_message, open_client
from client.config import config_file_path, save_connection


@click.command()
@click.option("--url", metavar="URL", help="Server URL to save (default: the one resolved now).")
@click.option("--token", metavar="TOKEN", help="Token to save (default: prompt, or read stdin).")
def login(url: str | None, token: str | None) -> None:
    """Save a server URL and token in ~/.config/sam/config.toml (mode 0600), in the context in
    use if there is one (`--context`, SAM_CONTEXT, `sam config use-context`).

    The token is checked with the server first; nothing is written if it is refused.
    """
    ctx = click.get_current_context()
    token = token or ctx.find_root().params.get("token")
    token = token or click.prompt("Token", hide_input=True, err=True).strip()
    me = open_client(url, token).whoami()
    resolved = ctx.meta["sam.config"]
    path = config_file_path()
    save_connection(
        path, url=resolved.url, token=token, context=ctx.find_root().params.get("context")
    )
    echo_message(
        f"logged in to {resolved.url} as {me.get('name')} (tenant {me.get('tenant')}, role {me.get('role')}); "
        f"saved to {path}"
    )
