"""Issue 29: the CLI showed job names with a right-to-left override (U+202E) or NUL as they
are. A name, user or error a tenant wrote reaches other people's terminals (an admin's `sam
queue --all`, a YAML dump piped to a pager): every output format shows the characters that
would lie there escaped, and the JSON and YAML still parse back to the same data."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click.testing
import pytest
import yaml

import client.commands.options as options
from client.cli import build_cli
from client.sdk import SamClient
from tests.client.fake_sam import USER_TOKEN, FakeSam

NAME = "invoice\u202egpj.exe\x00\x1b[2J"
USER = "mal\u2066lory\u2069"
MESSAGE = "bad\u202e\x1b[31m input"
RAW = ("\u202e", "\u2066", "\u2069", "\x00", "\x1b")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSam:
    """The in-memory fake SAM API the CLI talks to (as tests/client does)."""
    for name in ("SAM_URL", "SAM_TOKEN", "SAM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    api = FakeSam()
    monkeypatch.setattr(options, "SamClient", functools.partial(SamClient, transport=api.transport))
    return api


def sam(*args: str) -> click.testing.Result:
    env = {"SAM_URL": "http://sam.test", "SAM_TOKEN": USER_TOKEN}
    cli = build_cli(find_plugins=dict)
    return click.testing.CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def hostile(fake: FakeSam) -> FakeSam:
    fake.add_job(
        name=NAME,
        user=USER,
        state="running",
        started_at="2026-01-01T00:00:00Z",
        region={"wafer": "wse-0", "row": 0, "col": 0, "rows": 8, "cols": 8},
    )
    fake.add_job(
        name=NAME,
        state="failed",
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T01:00:00Z",
        error={"kind": "model_error", "message": MESSAGE, "details": {}},
    )
    return fake


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "--all"],
        ["queue", "--all", "-o", "wide"],
        ["status", "1"],
        ["status", "2"],
    ],
)
@pytest.mark.usefixtures("hostile")
def test_tables_and_views_show_the_characters_escaped(args: list[str]) -> None:
    result = sam(*args)
    assert result.exit_code == 0, result.stdout
    assert not [c for c in RAW if c in result.stdout], result.stdout
    assert "invoice\\u202egpj.exe\\x00\\x1b[2J" in result.stdout


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("args", [["queue", "--all"], ["status", "1"], ["status", "2"]])
@pytest.mark.usefixtures("hostile")
def test_json_and_yaml_escape_them_and_parse_back_to_the_same_data(
    args: list[str], fmt: str
) -> None:
    result = sam(*args, "-o", fmt)
    assert result.exit_code == 0, result.stdout
    assert not [c for c in RAW if c in result.stdout], result.stdout
    data = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    jobs = data if isinstance(data, list) else [data]
    assert {job["name"] for job in jobs} == {NAME}


def test_yaml_keeps_ordinary_non_ascii_names_as_they_are(fake: FakeSam) -> None:
    fake.add_job(name="café-模型")
    result = sam("status", "1", "-o", "yaml")
    assert "name: café-模型" in result.stdout
