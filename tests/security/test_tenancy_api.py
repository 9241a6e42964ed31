"""Issue 10's attacks on roles and tokens, through a real server (uvicorn) on SQLite and
PostgreSQL: a tenant admin escalating, a stolen token, an old SAM_ADMIN_TOKEN, and a job file
that reaches outside its folder."""

from __future__ import annotations

from pathlib import Path

import click.testing
import httpx

from client.cli import build_cli
from tests.conftest import ADMIN_TOKEN, LiveServer

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# httpx's default 5 s read timeout fails a request that waits its turn on a loaded machine
# (seen under a three-worker test run at load 18); a refusal still comes back at once.
HTTP = httpx.Client(timeout=30)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _tenant_with_user(url: str, tenant: str, user: str, role: str = "user") -> dict[str, str]:
    HTTP.post(f"{url}/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = HTTP.post(
        f"{url}/api/v1/tenants/{tenant}/users", json={"name": user, "role": role}, headers=ADMIN
    )
    r.raise_for_status()
    return _bearer(r.json()["token"])


def test_a_tenant_admin_cannot_escalate_to_cluster_admin(live_server) -> None:
    url = live_server.url
    mallory = _tenant_with_user(url, "evil", "mallory", role="admin")
    _tenant_with_user(url, "victim", "vic")
    attempts = [
        HTTP.put(f"{url}/api/v1/tenants/victim/quota", json={"max_pes": 1}, headers=mallory),
        HTTP.put(f"{url}/api/v1/tenants/evil/quota", json={}, headers=mallory),
        HTTP.post(f"{url}/api/v1/tenants", json={"name": "system"}, headers=mallory),
        HTTP.post(
            f"{url}/api/v1/tenants/victim/users",
            json={"name": "mole", "role": "admin"},
            headers=mallory,
        ),
        HTTP.post(
            f"{url}/api/v1/tenants/system/users",
            json={"name": "root", "role": "admin"},
            headers=mallory,
        ),
    ]
    assert [r.status_code for r in attempts] == [403, 403, 403, 404, 404]
    # An admin it makes in its own tenant is a tenant admin too, never a cluster admin.
    made = HTTP.post(
        f"{url}/api/v1/tenants/evil/users", json={"name": "m2", "role": "admin"}, headers=mallory
    )
    assert made.status_code == 201
    m2 = _bearer(made.json()["token"])
    assert HTTP.get(f"{url}/api/v1/whoami", headers=m2).json()["admin_of"] == "tenant"
    assert [t["name"] for t in HTTP.get(f"{url}/api/v1/tenants", headers=m2).json()] == ["evil"]
    victim_tokens = HTTP.get(f"{url}/api/v1/tokens?tenant=victim", headers=mallory).json()
    assert victim_tokens == []  # the filter cannot widen its view
    quota = HTTP.get(f"{url}/api/v1/tenants/victim", headers=ADMIN).json()["quota"]
    assert quota["max_pes"] is None


def test_a_stolen_token_dies_when_its_owner_rotates_it(live_server) -> None:
    url = live_server.url
    vic = _tenant_with_user(url, "victim", "vic")
    stolen = dict(vic)  # the thief holds a copy
    assert HTTP.get(f"{url}/api/v1/whoami", headers=stolen).status_code == 200
    mine = HTTP.get(f"{url}/api/v1/tokens", headers=vic).json()
    assert len(mine) == 1 and mine[0]["last_used_at"] is not None  # the theft shows up as use
    rotated = HTTP.post(f"{url}/api/v1/tokens/{mine[0]['id']}/rotate", headers=vic)
    assert rotated.status_code == 201
    assert HTTP.get(f"{url}/api/v1/whoami", headers=stolen).status_code == 401
    fresh = _bearer(rotated.json()["token"])
    assert HTTP.get(f"{url}/api/v1/jobs", headers=fresh).status_code == 200
    # The thief cannot list, rotate or revoke anything with the dead token.
    for call in (
        HTTP.get(f"{url}/api/v1/tokens", headers=stolen),
        HTTP.post(f"{url}/api/v1/tokens/{rotated.json()['id']}/rotate", headers=stolen),
    ):
        assert call.status_code == 401


def test_a_restart_with_a_new_admin_token_revokes_the_old_one(settings) -> None:
    with LiveServer(settings) as first:
        assert HTTP.get(f"{first.url}/api/v1/tenants", headers=ADMIN).status_code == 200
    rotated = settings.model_copy(update={"admin_token": "sam_admin_after_leak"})
    with LiveServer(rotated) as second:
        old = HTTP.get(f"{second.url}/api/v1/tenants", headers=ADMIN)
        assert old.status_code == 401
        new = HTTP.get(f"{second.url}/api/v1/tenants", headers=_bearer("sam_admin_after_leak"))
        assert new.status_code == 200
        listed = HTTP.get(
            f"{second.url}/api/v1/tokens?user=admin&include_revoked=true",
            headers=_bearer("sam_admin_after_leak"),
        ).json()
        assert [t["revoked_at"] is not None for t in listed] == [True, False]


def test_submit_refuses_a_file_outside_the_job_folder(live_server, tmp_path: Path) -> None:
    url = live_server.url
    vic = _tenant_with_user(url, "acme", "alice")
    (tmp_path / "victim_config.toml").write_text("password = 'hunter2'\n")
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    job = job_dir / "job.yaml"
    job.write_text(
        "name: x\nmodel: {file: ../victim_config.toml, class: Net}\n"
        "data: {source: synthetic, task: regression, input_shape: [8], batch_size: 4}\n"
    )
    token = vic["Authorization"].split()[1]
    result = click.testing.CliRunner().invoke(
        build_cli(find_plugins=dict), ["--url", url, "--token", token, "submit", str(job)]
    )
    assert result.exit_code == 1
    assert "outside the job file's folder" in result.stderr
    assert HTTP.get(f"{url}/api/v1/jobs", headers=vic).json()["items"] == []
