"""Server-side commands plug into `sam` lazily, and a broken plugin breaks nothing else."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import click.testing
import pytest

from client.cli import build_cli

GROUP = "sam.commands"


def plugins() -> dict[str, EntryPoint]:
    return {
        "hello": EntryPoint("hello", "tests.client.plugin_fixtures:hello", GROUP),
        "server": EntryPoint("server", "sam_no_such_package.cli:server", GROUP),
        "odd": EntryPoint("odd", "tests.client.plugin_fixtures:not_a_command", GROUP),
    }


def invoke(*args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(build_cli(find_plugins=plugins), list(args))


def test_plugin_runs_as_a_subcommand_with_its_own_options() -> None:
    result = invoke("hello", "--port", "9")
    assert result.exit_code == 0 and result.stdout == "hello on 9\n"


def test_help_lists_plugins_and_marks_broken_ones_unavailable() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    listing = result.stdout.split("Commands:")[1]
    assert "hello" in listing and "Say hello on a port." in listing
    assert "server" in listing and "unavailable: ModuleNotFoundError" in listing
    assert "odd" in listing and "not a click command" in listing.replace("\n", " ")
    assert "submit" in listing and "queue" in listing


def test_broken_plugin_fails_with_status_1_and_the_import_error() -> None:
    result = invoke("server", "--port", "1")
    assert result.exit_code == 1
    assert "`sam server` is unavailable" in result.stderr and "sam_no_such_package" in result.stderr


def test_client_commands_do_not_import_plugins(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "tests.client.plugin_fixtures", raising=False)
    result = invoke("queue", "--help")
    assert result.exit_code == 0
    assert "tests.client.plugin_fixtures" not in sys.modules


def test_unknown_command_is_a_usage_error() -> None:
    assert invoke("frobnicate").exit_code == 2


def test_real_entry_points_are_declared() -> None:
    from client.plugins import discover_plugins

    assert {"server", "scheduler", "db", "worker", "up", "demo", "sim"} <= set(discover_plugins())


def test_config_show_runs_the_servers_plugin_or_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sam config show` is the client's `config` group handing over to the server's plugin
    (entry-point group sam.config); without the server packages it says so in one line."""
    import client.plugins

    found = {"show": EntryPoint("show", "tests.client.plugin_fixtures:hello", "sam.config")}
    monkeypatch.setattr(client.plugins, "discover_plugins", lambda group: found)
    result = invoke("config", "show", "--port", "7")
    assert result.exit_code == 0 and result.stdout == "hello on 7\n"
    monkeypatch.setattr(client.plugins, "discover_plugins", lambda group: {})
    result = invoke("config", "show")
    assert result.exit_code == 1 and "needs the SAM server packages" in result.output
