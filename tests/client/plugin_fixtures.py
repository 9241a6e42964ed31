"""Click commands that the plugin tests declare as `sam.commands` entry points."""

from __future__ import annotations

import click

LOADED = []


@click.command()
@click.option("--port", type=int, default=8000)
def hello(port: int) -> None:
    """Say hello on a port."""
    click.echo(f"hello on {port}")


LOADED.append("hello")

not_a_command = 42
