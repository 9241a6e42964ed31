"""`sam admin token list|revoke|rotate` and `sam token` against the real server (uvicorn)."""

from __future__ import annotations

import json
from pathlib import Path

import click.testing
import pytest

from client.cli import build_cli
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: the server's own tests cover PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


def sam(url: str, token: str, *args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(
        build_cli(find_plugins=dict), ["--url", url, "--token", token, *args]
    )


def _user(url: str, tenant: str, name: str, role: str = "user") -> str:
    made = sam(url, ADMIN_TOKEN, "admin", "user", "create", tenant, name, "--role", role)
    assert made.exit_code == 0, made.stderr
    return made.stdout.strip()


def test_a_user_lists_and_rotates_its_own_token(live_server) -> None:
    url = live_server.url
    assert sam(url, ADMIN_TOKEN, "admin", "tenant", "create", "acme").exit_code == 0
    alice = _user(url, "acme", "alice")
    listed = sam(url, alice, "token", "list")
    assert listed.exit_code == 0, listed.stderr
    assert "PREFIX" in listed.stdout and alice[:8] in listed.stdout
    assert alice not in listed.stdout  # never the secret
    rows = json.loads(sam(url, alice, "admin", "token", "list", "-o", "json").stdout)
    assert [r["user"] for r in rows] == ["alice"]
    rotated = sam(url, alice, "token", "rotate", str(rows[0]["id"]))
    assert rotated.exit_code == 0, rotated.stderr
    new = rotated.stdout.strip()
    assert new != alice and "shown only once" in rotated.stderr
    assert sam(url, alice, "whoami").exit_code == 1  # the old token is dead
    assert "alice" in sam(url, new, "whoami").stdout


def test_a_tenant_admin_revokes_its_users_tokens_but_not_other_tenants(live_server) -> None:
    url = live_server.url
    for name in ("acme", "globex"):
        assert sam(url, ADMIN_TOKEN, "admin", "tenant", "create", name).exit_code == 0
    boss = _user(url, "acme", "boss", role="admin")
    ann = _user(url, "acme", "ann")
    gina = _user(url, "globex", "gina")
    gina_id = json.loads(sam(url, gina, "token", "list", "-o", "json").stdout)[0]["id"]
    ann_id = json.loads(sam(url, ann, "token", "list", "-o", "json").stdout)[0]["id"]
    refused = sam(url, boss, "admin", "token", "revoke", str(gina_id))
    assert refused.exit_code == 1 and "no token" in refused.stderr
    quota = sam(url, boss, "admin", "tenant", "set-quota", "acme", "--max-pes", "1")
    assert quota.exit_code == 1 and "cluster admin" in quota.stderr
    done = sam(url, boss, "admin", "token", "revoke", str(ann_id))
    assert done.exit_code == 0 and "revoked token" in done.stderr
    assert sam(url, ann, "whoami").exit_code == 1
    assert sam(url, gina, "whoami").exit_code == 0


def test_only_timestamp_columns_are_shortened() -> None:
    from client.commands.tokens import _cell

    assert _cell("prefix", "sam_T9xT") == "sam_T9xT"  # a prefix may hold a T
    assert _cell("created_at", "2026-12-01T02:11:09.123456Z") == "2026-12-01 02:11:09"
    assert _cell("revoked_at", None) == "-"
