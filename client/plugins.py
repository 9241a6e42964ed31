"""Server-side subcommands (`sam server`, `sam up`, ...) plugged in through entry points.

They live in the server packages and are declared under the entry-point group `sam.commands`.
The client loads one only when it is invoked or listed by `--help`, so a login node without the
server installed still has every client command, and a plugin that fails to import shows up as
unavailable instead of breaking `sam`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol

import click

ENTRY_POINT_GROUP = "sam.commands"
CONFIG_GROUP = "sam.config"  # server-side subcommands of `sam config` (`sam config show`)


class EntryPointLike(Protocol):
    """What the CLI reads of an entry point (importlib.metadata.EntryPoint has it too)."""

    name: str
    value: str

    def load(self) -> object: ...


class PluginRef:
    """A declared plugin command: its name and `module:attribute` (imported by `load`)."""

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value

    def load(self) -> object:
        import importlib

        module, _, attribute = self.value.partition(":")
        found: Any = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            found = getattr(found, part)
        return found


def discover_plugins(group: str = ENTRY_POINT_GROUP) -> dict[str, EntryPointLike]:
    """The declared plugin commands of entry-point `group` by name (nothing is imported).

    Reads the `[sam.commands]` section of each installed distribution's entry_points.txt on
    sys.path, as importlib.metadata would, without importing importlib.metadata: its import
    (email, zipfile, csv...) took longer than the rest of `sam --help`."""
    found: dict[str, EntryPointLike] = {}
    for folder in sys.path:
        base = folder or "."
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(base, entry, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            for name, value in section_items(text, group):
                found.setdefault(name, PluginRef(name, value))
    return found


def section_items(text: str, section: str) -> list[tuple[str, str]]:
    """The `name = value` lines of `[section]` in an entry_points.txt (an INI file)."""
    items, inside = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            inside = line.strip("[]").strip() == section
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            items.append((name.strip(), value.strip()))
    return items


def load_plugin(name: str, entry_point: EntryPointLike) -> click.Command:
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
