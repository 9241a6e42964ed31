"""Where `sam` finds its server URL and token."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.config import DEFAULT_URL, config_file_path, resolve_config
from client.errors import ClientConfigError


def write_config(config_home: Path, text: str) -> Path:
    path = config_home / "sam" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_default_is_local_server_without_token(isolated_config: Path) -> None:
    config = resolve_config(env={"XDG_CONFIG_HOME": str(isolated_config)})
    assert (config.url, config.token) == (DEFAULT_URL, None)


def test_flags_beat_env_beat_file(isolated_config: Path) -> None:
    write_config(isolated_config, 'url = "http://file:1"\ntoken = "file-token"\n')
    env = {
        "XDG_CONFIG_HOME": str(isolated_config),
        "SAM_URL": "http://env:2",
        "SAM_TOKEN": "env-token",
    }
    assert resolve_config(env={"XDG_CONFIG_HOME": str(isolated_config)}).token == "file-token"
    from_env = resolve_config(env=env)
    assert (from_env.url, from_env.token) == ("http://env:2", "env-token")
    from_flags = resolve_config("http://flag:3", "flag-token", env=env)
    assert (from_flags.url, from_flags.token, from_flags.token_source) == (
        "http://flag:3",
        "flag-token",
        "--token",
    )


def test_each_setting_resolves_on_its_own(isolated_config: Path) -> None:
    write_config(isolated_config, 'token = "file-token"\n')
    config = resolve_config(
        env={"XDG_CONFIG_HOME": str(isolated_config), "SAM_URL": "http://env:2"}
    )
    assert (config.url, config.token) == ("http://env:2", "file-token")


def test_config_file_honours_xdg_then_home(tmp_path: Path) -> None:
    assert config_file_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/sam/config.toml")
    assert config_file_path({"HOME": str(tmp_path)}) == tmp_path / ".config" / "sam" / "config.toml"


def test_malformed_config_file_names_the_file(isolated_config: Path) -> None:
    path = write_config(isolated_config, "url = \n")
    with pytest.raises(ClientConfigError, match=str(path)):
        resolve_config(env={"XDG_CONFIG_HOME": str(isolated_config)})


def test_cli_uses_config_file_token(run_sam, fake, isolated_config: Path) -> None:
    write_config(isolated_config, 'token = "admin-secret"\n')
    result = run_sam("whoami", "-o", "json", token=None)
    assert result.exit_code == 0, result.stderr
    assert '"role": "admin"' in result.stdout
    flagged = run_sam("--token", "alice-secret", "whoami", "-o", "json", token=None)
    assert '"name": "alice"' in flagged.stdout


def test_subcommand_flag_beats_group_flag(run_sam) -> None:
    result = run_sam("--token", "admin-secret", "whoami", "--token", "alice-secret", "-o", "json")
    assert '"name": "alice"' in result.stdout


def test_login_checks_the_token_then_saves_it_privately(run_sam, isolated_config: Path) -> None:
    refused = run_sam("login", input="wrong-token\n", token=None)
    assert refused.exit_code == 1 and not (isolated_config / "sam" / "config.toml").exists()
    result = run_sam("login", "--url", "http://sam.test", input="alice-secret\n", token=None)
    assert result.exit_code == 0, result.stderr
    assert "as alice (tenant acme" in result.stderr
    path = isolated_config / "sam" / "config.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    saved = resolve_config(env={"XDG_CONFIG_HOME": str(isolated_config)})
    assert (saved.url, saved.token) == ("http://sam.test", "alice-secret")
    assert run_sam("whoami", token=None, env={"SAM_URL": ""}).exit_code == 0  # uses the file
