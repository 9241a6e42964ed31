"""`sam --help` describes every command without importing it: the tables it reads say what each
command's own help says, and the entry points it reads are importlib.metadata's."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import click.testing

from client.cli import (
    CLIENT_COMMANDS,
    PLUGIN_SHORT_HELP,
    SHORT_HELP,
    build_cli,
    load_client_command,
)
from client.plugins import ENTRY_POINT_GROUP, discover_plugins


def test_every_client_command_has_its_own_short_help_in_the_table() -> None:
    assert set(SHORT_HELP) == set(CLIENT_COMMANDS)
    for name in CLIENT_COMMANDS:
        command = load_client_command(name)
        for limit in (30, 45, 80, 200):
            listed = click.Command(name, help=SHORT_HELP[name]).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), (name, limit)


def test_every_plugin_of_this_project_has_its_own_short_help_in_the_table() -> None:
    declared = {ep.value: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert set(PLUGIN_SHORT_HELP) <= set(declared)
    for value, text in PLUGIN_SHORT_HELP.items():
        command = declared[value].load()
        for limit in (30, 45, 80, 200):
            listed = click.Command("x", help=text).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), (value, limit)


def test_the_entry_point_reader_agrees_with_importlib_metadata() -> None:
    ours = {name: ep.value for name, ep in discover_plugins().items()}
    theirs = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert ours == theirs and {"server", "up", "sim"} <= set(ours)


def test_help_lists_every_command_and_imports_none() -> None:
    result = click.testing.CliRunner().invoke(build_cli(), ["--help"])
    listing = result.stdout.split("Commands:")[1]
    for name in [*CLIENT_COMMANDS, "server", "up", "sim"]:
        assert f"\n  {name} " in listing, name
    code = (
        "import sys\nfrom client.entry import main\n"
        "try: main(['--help'])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('client.commands', 'sam_server',"
        " 'sam_worker', 'importlib.metadata'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
