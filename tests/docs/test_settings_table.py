"""The operator guide's settings table is the one `Settings` generates, and every setting says
what it does (the `#` comment above its field)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sam_server.config import Settings, setting_names

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operator-guide.md"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


settings_table = _load(ROOT / "scripts" / "settings_table.py", "settings_table")


def test_every_setting_has_a_comment_above_its_field() -> None:
    found = settings_table.rows(Settings)
    names = [
        (f"{section}.{name}" if section else name, env) for section, name, env in setting_names()
    ]
    assert [(row.field, row.env) for row in found] == names
    assert ("worker.lease_s", "SAM_LEASE_S") in names  # a section keeps the flat variable
    assert ("sandbox.bwrap", "SAM_SANDBOX_BWRAP") in names
    assert all(row.comment for row in found)


def test_the_operator_guide_shows_the_current_table() -> None:
    doc = GUIDE.read_text()
    fresh = settings_table.replaced(doc, settings_table.table(settings_table.rows(Settings)))
    assert fresh == doc, (
        "docs/operator-guide.md's settings table is stale: run "
        "`python scripts/settings_table.py --write docs/operator-guide.md`"
    )
    assert "| `database_url` | `SAM_DATABASE_URL` | unset |" in doc


SAMPLE = """
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel
from pydantic_settings import BaseSettings, SettingsConfigDict


class Limits(BaseModel):
    # Jobs at once.
    jobs: int = 4


class Worker(BaseModel):
    env_prefix: ClassVar[str] = "SAM_"
    # Seconds a lease lasts.
    lease_s: float = 30.0


class Sample(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAM_", env_nested_delimiter="__")

    # Where things go,
    # on two lines.
    data_dir: Path = Path("./data")

    # A group heading, not a field's comment.

    # Seconds | between polls.
    poll_s: float = 0.5
    # The limits.
    limits: Limits = Limits()
    worker: Worker = Worker()
    flag: bool = False
"""


def test_comments_defaults_and_nested_settings_and_a_missing_comment(tmp_path: Path) -> None:
    path = tmp_path / "sample_settings.py"
    path.write_text(SAMPLE)
    module = _load(path, "sample_settings")
    with pytest.raises(settings_table.MissingComment, match="flag"):
        settings_table.rows(module.Sample)
    path.write_text(SAMPLE.replace("    flag: bool", "    # Off by default.\n    flag: bool"))
    module = _load(path, "sample_settings")
    found = settings_table.rows(module.Sample)
    assert [(r.field, r.env, r.default, r.comment) for r in found] == [
        ("data_dir", "SAM_DATA_DIR", "`./data`", "Where things go, on two lines."),
        ("poll_s", "SAM_POLL_S", "`0.5`", "Seconds | between polls."),
        ("limits.jobs", "SAM_LIMITS__JOBS", "`4`", "Jobs at once."),
        ("worker.lease_s", "SAM_LEASE_S", "`30.0`", "Seconds a lease lasts."),
        ("flag", "SAM_FLAG", "`false`", "Off by default."),
    ]
    text = settings_table.table(found)
    assert "| `poll_s` | `SAM_POLL_S` | `0.5` | Seconds \\| between polls. |" in text
    doc = f"# Guide\n\n{settings_table.START}\nold\n{settings_table.END}\n\nafter\n"
    assert settings_table.replaced(doc, text) == f"# Guide\n\n{text}\n\nafter\n"
