"""Issue 29: docker-compose.yml defaulted the production admin token to `sam-admin-change-me`
and the server accepted it. Compose now asks for every secret from the operator's environment,
and a production server refuses a known default or weak token at start with one line that says
how to make a strong one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sam_server.config import Settings

ROOT = Path(__file__).resolve().parents[2]
STRONG = "sam_admin_" + "9f2c4e6a8b1d3f5a7c9e0b2d4f6a8c1e"


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("sam-admin-change-me", "known default"),
        ("admin", "known default"),
        ("my-own-change-me-token-please-1234", "known default"),
        ("short-but-mine", "14 characters"),
        ("ab" * 20, "2 distinct characters"),
    ],
)
def test_production_refuses_a_weak_admin_token(token: str, why: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        Settings(env="production", admin_token=token, data_dir=tmp_path)
    assert "openssl rand -hex 32" in str(caught.value)


def test_production_refuses_a_weak_metrics_token_and_takes_strong_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SAM_METRICS_TOKEN has 6 characters"):
        Settings(env="production", admin_token=STRONG, metrics_token="metric", data_dir=tmp_path)
    strong = Settings(env="production", admin_token=STRONG, metrics_token=STRONG[::-1])
    assert strong.admin_token == STRONG
    # development keeps accepting anything (tests, a laptop)
    assert Settings(admin_token="sam-admin-change-me").admin_token == "sam-admin-change-me"


def test_the_server_refuses_to_start_with_the_old_compose_default(tmp_path: Path) -> None:
    """`sam server` ends at once with one line (no traceback) naming the setting and the fix."""
    env = {
        **os.environ,
        "SAM_ENV": "production",
        "SAM_ADMIN_TOKEN": "sam-admin-change-me",
        "SAM_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", "from client.entry import main; main()", "server", "--port", "1"],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "sam: cannot start: SAM_ADMIN_TOKEN is a known default ('sam-admin-change-me'); "
        "SAM_ENV=production refuses it: set a random one, e.g. "
        "export SAM_ADMIN_TOKEN=$(openssl rand -hex 32)"
    ], result.stderr


def test_compose_has_no_default_secret() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert "change-me" not in text
    compose = yaml.safe_load(text)
    sam_env = compose["services"]["server"]["environment"]
    assert sam_env["SAM_ENV"] == "production"
    grafana = compose["services"]["grafana"]["environment"]
    for value, name in (
        (sam_env["SAM_ADMIN_TOKEN"], "SAM_ADMIN_TOKEN"),
        (sam_env["SAM_METRICS_TOKEN"], "SAM_METRICS_TOKEN"),
        (grafana["GF_SECURITY_ADMIN_PASSWORD"], "GRAFANA_ADMIN_PASSWORD"),
    ):
        # `${VAR:?message}`: compose refuses to start without it, saying so
        assert re.fullmatch(r"\$\{" + name + r":\?set " + name + r" [^}]+\}", value), value
