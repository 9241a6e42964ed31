"""Passwords in database and broker URLs never reach a terminal or a log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sam_server.config import redact_url
from tests.conftest import create_pg_database, drop_pg_database

SAM = str(Path(sys.executable).parent / "sam")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://sam:s3cret@db:5432/sam", "postgresql://sam:***@db:5432/sam"),
        ("postgresql+psycopg://sam:p%40ss@db/sam", "postgresql+psycopg://sam:***@db/sam"),
        ("redis://:hunter2@redis:6379/0", "redis://:***@redis:6379/0"),
        ("postgresql://sam@db/sam", "postgresql://sam@db/sam"),
        ("sqlite:////data/sam.db", "sqlite:////data/sam.db"),
        ("filesystem://", "filesystem://"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.postgres
def test_db_upgrade_does_not_print_the_password(tmp_path: Path) -> None:
    url = create_pg_database()
    try:
        # trust authentication ignores the password, so the upgrade really runs with it
        with_password = url.replace("://postgres@", "://postgres:Pa55-w0rd-here@", 1)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
        env.update(SAM_DATABASE_URL=with_password, SAM_DATA_DIR=str(tmp_path), HOME=str(tmp_path))
        done = subprocess.run(
            [SAM, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "Pa55-w0rd-here" not in done.stdout + done.stderr
        assert "postgres:***@" in done.stderr
    finally:
        drop_pg_database(url)
