"""The settings tree: every SAM_* variable still sets the same setting, a settings file fills
in what the environment does not, and `sam config show` says where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sam_server.cli import config_show
from sam_server.config import Settings, origins, setting_names
from sam_server.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, _, var in setting_names():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("SAM_SETTINGS_FILE", raising=False)


def test_each_variable_sets_its_setting_in_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAM_LEASE_S", "7")
    monkeypatch.setenv("SAM_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("sam_scheduler_profile", "easy")  # names are matched ignoring case
    monkeypatch.setenv("SAM_SANDBOX_SPAWNER", "0")
    monkeypatch.setenv("SAM_SANDBOX_UID_BASE", "62000")
    monkeypatch.setenv("SAM_LOG_LEVEL", "warning")
    settings = Settings()
    assert settings.worker.lease_s == 7.0 and settings.api.max_body_bytes == 2048
    assert settings.scheduler.scheduler_profile == "easy"
    assert settings.sandbox.options().spawner is False
    assert settings.sandbox.options().uid_base == 62000
    assert settings.log_level == "WARNING"
    monkeypatch.setenv("SAM_LEASE_S", "soon")
    with pytest.raises(ValueError, match="lease_s"):
        Settings()


def test_every_variable_the_docs_list_is_a_setting() -> None:
    """docs/contract.md and the operator guide name the variables users set; each is still one."""
    names = {var for _, _, var in setting_names()}
    docs = (ROOT / "docs" / "operator-guide.md").read_text()
    for var in ("SAM_DATABASE_URL", "SAM_LEASE_S", "SAM_MAX_ARRAY_TASKS", "SAM_SANDBOX_BWRAP"):
        assert var in names and var in docs
    assert len(names) == len(setting_names())  # no two settings share a variable


def test_the_settings_file_fills_in_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sam.yaml"
    path.write_text("data_dir: /srv/sam\nworker:\n  lease_s: 12\n  heartbeat_s: 3\n")
    monkeypatch.setenv("SAM_SETTINGS_FILE", str(path))
    monkeypatch.setenv("SAM_HEARTBEAT_S", "4")
    settings = Settings()
    assert settings.data_dir == Path("/srv/sam") and settings.worker.lease_s == 12.0
    assert settings.worker.heartbeat_s == 4.0
    where = {name: source for name, _, source in origins(settings)}
    assert where["worker.lease_s"] == f"file {path}"
    assert where["worker.heartbeat_s"] == "SAM_HEARTBEAT_S"
    assert where["api.max_body_bytes"] == "default"
    path.write_text("worker:\n  lease: 12\n")
    with pytest.raises(ValueError, match="lease"):
        Settings()
    path.write_text("wokrer:\n  lease_s: 12\n")
    with pytest.raises(ConfigError, match="unknown settings: wokrer"):
        Settings()


def test_updated_routes_flat_names_and_refuses_unknown_ones() -> None:
    settings = Settings()
    changed = settings.updated(lease_s=2.0, cluster=Path("c.yaml"), bulk_chunk_rows=5)
    assert (changed.worker.lease_s, changed.api.bulk_chunk_rows) == (2.0, 5)
    assert changed.cluster == Path("c.yaml") and settings.worker.lease_s == 30.0
    with pytest.raises(TypeError, match="lease"):
        settings.updated(lease=1)
    with pytest.raises(TypeError, match="updated"):
        settings.model_copy(update={"lease_s": 1})


def test_config_show_prints_every_setting_with_its_source_and_hides_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAM_LEASE_S", "9")
    monkeypatch.setenv("SAM_ADMIN_TOKEN", "sam_admin_secret")
    monkeypatch.setenv("SAM_DATABASE_URL", "postgresql://sam:hunter2@db/sam")
    from sam_server.config import get_settings

    get_settings.cache_clear()
    try:
        text = CliRunner().invoke(config_show, []).output
        rows = [
            json.loads(line)
            for line in CliRunner().invoke(config_show, ["--json"]).output.splitlines()
        ]
    finally:
        get_settings.cache_clear()
    assert len(rows) == len(setting_names())
    by_name = {row["setting"]: row for row in rows}
    assert by_name["worker.lease_s"] == {
        "setting": "worker.lease_s",
        "value": "9.0",
        "source": "SAM_LEASE_S",
    }
    assert by_name["api.max_body_bytes"]["source"] == "default"
    assert by_name["admin_token"]["value"] == "***"
    assert by_name["database_url"]["value"] == "postgresql://sam:***@db/sam"
    assert "hunter2" not in text and "sam_admin_secret" not in text
    assert "sandbox.bwrap" in text and "SAM_LEASE_S" in text


def test_a_section_setting_passed_by_its_name_alone_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAM_LEASE_S", "7")
    monkeypatch.setenv("SAM_HEARTBEAT_S", "2")
    settings = Settings(lease_s=4, metrics_token="t" * 30)
    assert (settings.worker.lease_s, settings.worker.heartbeat_s) == (4.0, 2.0)
    assert settings.metrics.metrics_token == "t" * 30
    with pytest.raises(ValueError, match="leas_s"):
        Settings(leas_s=3)  # a misspelt setting is an error, not silently ignored
