"""Server-side subcommands (`sam server`, `sam up`, ...) plugged in through entry points.

They live in the server packages and are declared under the entry-point group `sam.commands`.
The client loads one only when it is invoked or listed by `--help`, so a login node without the
server installed still has every client command, and a plugin that fails to import shows up as
unavailable instead of breaking `sam`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "sam.commands"


def discover_plugins() -> dict[str, EntryPoint]:
    """The declared plugin commands by name (nothing is imported)."""
    from importlib.metadata import entry_points  # scanning installed packages: only when needed

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_plugin(name: str, entry_point: EntryPoint) -> click.Command:
    """Import a plugin's click command; an import failure gives an 'unavailable' stand-in."""
    try:
        command = entry_point.load()
    except (Exception, SystemExit) as exc:  # any import failure, reported to the user
        return unavailable_command(name, entry_point.value, f"{type(exc).__name__}: {exc}")
    if not isinstance(command, click.Command):
        return unavailable_command(name, entry_point.value, "not a click command")
    return command


def unavailable_command(name: str, target: str, error: str) -> click.Command:
    """A stand-in that explains why `sam NAME` cannot run; invoking it exits with status 1."""

    def explain_unavailable(args: tuple[str, ...]) -> None:
        """Say why the command cannot run, whatever arguments it was given."""
        click.echo(
            f"error: `sam {name}` is unavailable: {target} failed to load ({error}). "
            "It needs the SAM server packages; install the full `sam-scheduler` package.",
            err=True,
        )
        raise click.exceptions.Exit(1)

    return click.Command(
        name,
        callback=explain_unavailable,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"(unavailable: {error})",
        short_help=f"(unavailable: {error})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
