"""Where the client finds the server URL and token.

Precedence, highest first: `--url`/`--token`, `SAM_URL`/`SAM_TOKEN`, the config file
(`$XDG_CONFIG_HOME/sam/config.toml`, by default `~/.config/sam/config.toml`, keys `url` and
`token`), then `http://127.0.0.1:8000` with no token. Each setting is resolved on its own, so a
token from the file combines with a URL from the environment.

Contexts (kubectl's habit): the file may hold named `[contexts.NAME]` tables with `url` and
`token`, and `current-context = "NAME"` picks one (`sam config use-context NAME`); `--context` or
`SAM_CONTEXT` picks one for a single call. With no context in use, the top-level keys apply.
"""

from __future__ import annotations

import os
from pathlib import Path

from client.errors import ClientConfigError, SamClientError

TYPE_CHECKING = False  # typing's import is spared on `sam submit`'s path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"


class ClientConfig:
    """The resolved connection settings, and where each came from (for error messages).

    A plain class: importing dataclasses (and inspect with it) costs a short command more than
    this whole module."""

    __slots__ = ("url", "token", "url_source", "token_source")

    def __init__(self, url: str, token: str | None, url_source: str, token_source: str) -> None:
        self.url = url
        self.token = token
        self.url_source = url_source
        self.token_source = token_source

    def __repr__(self) -> str:
        return (
            f"ClientConfig(url={self.url!r}, token={'***' if self.token else None}, "
            f"url_source={self.url_source!r}, token_source={self.token_source!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClientConfig):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


def config_file_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path: `SAM_CONFIG` if set, else `<XDG_CONFIG_HOME or ~/.config>/sam/config.toml`."""
    env = os.environ if env is None else env
    if env.get("SAM_CONFIG"):
        return Path(env["SAM_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base).expanduser() / "sam" / "config.toml"


def read_config_document(path: Path) -> dict[str, Any]:
    """The whole TOML config file; an absent file gives `{}`."""
    import tomllib  # only when a setting is not given by a flag or the environment

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ClientConfigError(
            f"cannot read the client config {path}: {exc}; fix the file (TOML with keys "
            "url and token) or remove it"
        ) from exc


def config_contexts(document: Mapping[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """The file's `[contexts.NAME]` tables by name."""
    contexts = document.get("contexts") or {}
    if not isinstance(contexts, dict) or not all(isinstance(v, dict) for v in contexts.values()):
        raise ClientConfigError(f"{path}: 'contexts' must hold tables [contexts.NAME]")
    return contexts


def read_config_file(path: Path, context: str | None = None) -> dict[str, str]:
    """The `url` and `token` of a TOML config file: those of `context`, else of the file's
    `current-context`, else the top-level keys; an absent file gives `{}`."""
    data = read_config_document(path)
    name = context or data.get("current-context")
    if name:
        contexts = config_contexts(data, path)
        if name not in contexts:
            known = ", ".join(sorted(contexts)) or "none yet"
            raise ClientConfigError(
                f"no context {name!r} in {path} (known: {known}); add it with `sam config "
                f"set-context {name} --url URL --token TOKEN`"
            )
        data = contexts[name]
    settings = {}
    for key in ("url", "token"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ClientConfigError(f"{path}: '{key}' must be a string, got {value!r}")
        if value:
            settings[key] = value
    return settings


def resolve_config(
    url: str | None = None,
    token: str | None = None,
    env: Mapping[str, str] | None = None,
    context: str | None = None,
) -> ClientConfig:
    """Resolve URL and token from flags, environment, config file and default, in that order
    (the file's values from `context`, else SAM_CONTEXT, else its current-context)."""
    env = os.environ if env is None else env
    file_path = config_file_path(env)
    from_file: dict[str, str] | None = None

    def from_config(key: str) -> str | None:
        nonlocal from_file
        if from_file is None:
            from_file = read_config_file(file_path, context or env.get("SAM_CONTEXT") or None)
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


def write_config_file(path: Path, settings: Mapping[str, Any]) -> None:
    """Write settings as TOML (top-level strings, then `[contexts.NAME]` tables), readable by
    the owner only (it holds secrets)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON string escapes are valid TOML basic-string escapes for these ASCII-safe values.
    body = "".join(
        f"{key} = {json.dumps(value)}\n"
        for key, value in settings.items()
        if value and isinstance(value, str)
    )
    for name, table in (settings.get("contexts") or {}).items():
        body += f"\n[contexts.{json.dumps(name)}]\n"
        body += "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items() if v)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(body)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT


def save_connection(path: Path, *, url: str, token: str, context: str | None = None) -> None:
    """Store `url` and `token` in the context in use (`context`, SAM_CONTEXT, the file's
    current-context), or at the top level when none is; other settings are kept."""
    document = read_config_document(path)
    name = context or os.environ.get("SAM_CONTEXT") or document.get("current-context")
    if name:
        contexts = config_contexts(document, path)
        contexts[name] = {**contexts.get(name, {}), "url": url, "token": token}
        document["contexts"] = contexts
    else:
        document.update(url=url, token=token)
    write_config_file(path, document)


DEFAULT_TIMEOUT_S = 30.0


def default_timeout_s() -> float:
    """SAM_TIMEOUT (seconds to wait for an answer), else DEFAULT_TIMEOUT_S."""
    text = os.environ.get("SAM_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:  # also refuses nan and inf
        raise SamClientError(f"SAM_TIMEOUT={text!r}: give the seconds to wait, e.g. 120")
    return value


def hash_cache_path() -> Path:
    """Where `sam submit` remembers its files' hashes: $XDG_CACHE_HOME/sam, else ~/.cache/sam."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "sam" / "hashes.json"
