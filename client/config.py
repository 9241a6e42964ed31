"""Where the client finds the server URL and token.

Precedence, highest first: `--url`/`--token`, `SAM_URL`/`SAM_TOKEN`, the config file
(`$XDG_CONFIG_HOME/sam/config.toml`, by default `~/.config/sam/config.toml`, keys `url` and
`token`), then `http://127.0.0.1:8000` with no token. Each setting is resolved on its own, so a
token from the file combines with a URL from the environment.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from client.errors import ClientConfigError

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class ClientConfig:
    """The resolved connection settings, and where each came from (for error messages)."""

    url: str
    token: str | None
    url_source: str
    token_source: str


def config_file_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path: `SAM_CONFIG` if set, else `<XDG_CONFIG_HOME or ~/.config>/sam/config.toml`."""
    env = os.environ if env is None else env
    if env.get("SAM_CONFIG"):
        return Path(env["SAM_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base).expanduser() / "sam" / "config.toml"


def read_config_file(path: Path) -> dict[str, str]:
    """The `url` and `token` keys of a TOML config file; an absent file gives `{}`."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ClientConfigError(
            f"cannot read the client config {path}: {exc}; fix the file (TOML with keys "
            "url and token) or remove it"
        ) from exc
    settings = {}
    for key in ("url", "token"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ClientConfigError(f"{path}: '{key}' must be a string, got {value!r}")
        if value:
            settings[key] = value
    return settings


def resolve_config(
    url: str | None = None, token: str | None = None, env: Mapping[str, str] | None = None
) -> ClientConfig:
    """Resolve URL and token from flags, environment, config file and default, in that order."""
    env = os.environ if env is None else env
    file_path = config_file_path(env)
    from_file: dict[str, str] | None = None

    def from_config(key: str) -> str | None:
        nonlocal from_file
        if from_file is None:
            from_file = read_config_file(file_path)
        return from_file.get(key)

    resolved: dict[str, tuple[str | None, str]] = {}
    for key, flag_value, env_name in (("url", url, "SAM_URL"), ("token", token, "SAM_TOKEN")):
        if flag_value:
            resolved[key] = (flag_value, f"--{key}")
        elif env.get(env_name):
            resolved[key] = (env[env_name], env_name)
        elif (file_value := from_config(key)) is not None:
            resolved[key] = (file_value, str(file_path))
        else:
            resolved[key] = (DEFAULT_URL if key == "url" else None, "default")
    return ClientConfig(
        url=str(resolved["url"][0]),
        token=resolved["token"][0],
        url_source=resolved["url"][1],
        token_source=resolved["token"][1],
    )


def write_config_file(path: Path, settings: Mapping[str, str]) -> None:
    """Write `url`/`token` settings as TOML, readable by the owner only (it holds a secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON string escapes are valid TOML basic-string escapes for these ASCII-safe values.
    body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items() if value)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(body)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT
