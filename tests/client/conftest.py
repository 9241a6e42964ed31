"""Fixtures: the `sam` CLI run in-process against the in-memory fake SAM API."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import click.testing
import pytest

import client.commands.options as options
from client.cli import build_cli
from client.sdk import SamClient
from tests.client.fake_sam import USER_TOKEN, FakeSam

RunSam = Callable[..., click.testing.Result]


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's real config file or SAM_* variables."""
    for name in ("SAM_URL", "SAM_TOKEN", "SAM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    config_home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setattr(SamClient, "retry_delay_s", 0.0)
    return config_home


@pytest.fixture
def fake() -> FakeSam:
    return FakeSam()


@pytest.fixture
def run_sam(fake: FakeSam, monkeypatch: pytest.MonkeyPatch) -> RunSam:
    """Run `sam ARGS...` against `fake` as alice (pass token=... to be someone else)."""
    monkeypatch.setattr(
        options, "SamClient", functools.partial(SamClient, transport=fake.transport)
    )

    def run(
        *args: str,
        token: str | None = USER_TOKEN,
        env: dict[str, str] | None = None,
        input: str | None = None,
    ) -> click.testing.Result:
        cli = build_cli(find_plugins=dict)
        full_env = {
            "SAM_URL": "http://sam.test",
            **({"SAM_TOKEN": token} if token else {}),
            **(env or {}),
        }
        return click.testing.CliRunner().invoke(
            cli, list(args), env=full_env, input=input, catch_exceptions=False
        )

    return run
