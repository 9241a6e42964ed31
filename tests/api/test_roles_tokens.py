"""Cluster admin vs tenant admin, and token list / revoke / rotate (SQLite and PostgreSQL)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from sam_server.app import create_app
from tests.api.helpers import ADMIN, bearer, make_tenant, make_user, spec, submit


def _two_tenants(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "acme")
    make_tenant(client, "globex")
    return make_user(client, "acme", "boss", role="admin"), make_user(client, "globex", "gina")


def test_a_tenant_admin_cannot_touch_tenants_quotas_or_urgent(client):
    boss, _ = _two_tenants(client)
    assert client.get("/api/v1/whoami", headers=boss).json()["admin_of"] == "tenant"
    quota = client.put("/api/v1/tenants/globex/quota", json={"max_pes": 1}, headers=boss)
    assert quota.status_code == 403
    assert "cluster admin" in quota.json()["detail"]
    assert client.put("/api/v1/tenants/acme/quota", json={}, headers=boss).status_code == 403
    assert client.post("/api/v1/tenants", json={"name": "evil"}, headers=boss).status_code == 403
    assert client.get("/api/v1/tenants/globex", headers=boss).status_code == 404
    assert [t["name"] for t in client.get("/api/v1/tenants", headers=boss).json()] == ["acme"]
    assert submit(client, boss, spec(priority="urgent")).status_code == 403
    theirs = client.get("/api/v1/tenants/globex", headers=ADMIN).json()
    assert theirs["quota"]["max_pes"] is None  # unchanged


def test_a_tenant_admin_manages_only_its_own_tenants_users(client):
    boss, _ = _two_tenants(client)
    made = client.post("/api/v1/tenants/acme/users", json={"name": "ann"}, headers=boss)
    assert made.status_code == 201
    ann = bearer(made.json()["token"])
    assert client.get("/api/v1/whoami", headers=ann).json()["tenant"] == "acme"
    other = client.post("/api/v1/tenants/globex/users", json={"name": "mole"}, headers=boss)
    assert other.status_code == 404  # other tenants do not exist for it
    plain = client.post("/api/v1/tenants/acme/users", json={"name": "x"}, headers=ann)
    assert plain.status_code == 403


def test_admins_of_the_system_tenant_are_cluster_admins(client):
    make_tenant(client, "system")
    make_tenant(client, "acme")
    ops = make_user(client, "system", "ops", role="admin")
    assert client.get("/api/v1/whoami", headers=ops).json()["admin_of"] == "cluster"
    r = client.put("/api/v1/tenants/acme/quota", json={"max_pes": 64}, headers=ops)
    assert r.status_code == 200 and r.json()["quota"]["max_pes"] == 64
    assert submit(client, ops, spec(priority="urgent")).status_code == 201


def test_token_list_shows_no_secret_and_is_scoped(client):
    boss, gina = _two_tenants(client)
    ann = make_user(client, "acme", "ann")
    mine = client.get("/api/v1/tokens", headers=ann).json()
    assert [(t["user"], t["tenant"]) for t in mine] == [("ann", "acme")]
    assert set(mine[0]) == {
        "id",
        "prefix",
        "user",
        "tenant",
        "created_at",
        "last_used_at",
        "revoked_at",
        "bootstrap",
    }
    assert mine[0]["last_used_at"] is not None  # the call itself used it
    secret = ann["Authorization"].split()[1]
    assert secret.startswith(mine[0]["prefix"]) and secret not in str(mine)
    by_boss = client.get("/api/v1/tokens", headers=boss).json()
    assert {t["user"] for t in by_boss} == {"boss", "ann"}
    every = client.get("/api/v1/tokens", headers=ADMIN).json()
    assert {t["user"] for t in every} == {"admin", "boss", "ann", "gina"}
    assert [t["user"] for t in every if t["bootstrap"]] == ["admin"]
    only = client.get("/api/v1/tokens?tenant=globex", headers=ADMIN).json()
    assert [t["user"] for t in only] == ["gina"]


def test_rotate_revokes_the_old_token_and_shows_the_new_one_once(client):
    boss, gina = _two_tenants(client)
    tid = client.get("/api/v1/tokens", headers=gina).json()[0]["id"]
    r = client.post(f"/api/v1/tokens/{tid}/rotate", headers=gina)
    assert r.status_code == 201
    new = bearer(r.json()["token"])
    assert client.get("/api/v1/whoami", headers=gina).status_code == 401
    assert client.get("/api/v1/whoami", headers=new).json()["name"] == "gina"
    listed = client.get("/api/v1/tokens", headers=new).json()
    assert [t["id"] for t in listed] == [r.json()["id"]] and "token" not in listed[0]
    again = client.post(f"/api/v1/tokens/{tid}/rotate", headers=ADMIN)
    assert again.status_code == 409


def test_revoke_is_own_tenant_only_and_ids_do_not_leak(client):
    boss, gina = _two_tenants(client)
    ann = make_user(client, "acme", "ann")
    gina_id = client.get("/api/v1/tokens", headers=gina).json()[0]["id"]
    ann_id = client.get("/api/v1/tokens", headers=ann).json()[0]["id"]
    assert client.post(f"/api/v1/tokens/{gina_id}/revoke", headers=boss).status_code == 404
    assert client.post(f"/api/v1/tokens/{gina_id}/rotate", headers=boss).status_code == 404
    assert client.post(f"/api/v1/tokens/{ann_id}/revoke", headers=gina).status_code == 404
    assert client.get("/api/v1/whoami", headers=gina).status_code == 200
    r = client.post(f"/api/v1/tokens/{ann_id}/revoke", headers=boss)
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    assert client.get("/api/v1/whoami", headers=ann).status_code == 401
    revoked = client.get("/api/v1/tokens?include_revoked=true&user=ann", headers=boss).json()
    assert [t["id"] for t in revoked] == [ann_id]


def test_the_bootstrap_token_is_replaced_only_by_a_restart(client, settings):
    admin_tid = next(
        t["id"] for t in client.get("/api/v1/tokens", headers=ADMIN).json() if t["bootstrap"]
    )
    r = client.post(f"/api/v1/tokens/{admin_tid}/revoke", headers=ADMIN)
    assert r.status_code == 409 and "SAM_ADMIN_TOKEN" in r.json()["detail"]
    restarted = settings.model_copy(update={"admin_token": "sam_admin_rotated"})
    with TestClient(create_app(restarted)) as fresh:
        assert fresh.get("/api/v1/whoami", headers=ADMIN).status_code == 401
        new = fresh.get("/api/v1/whoami", headers=bearer("sam_admin_rotated"))
        assert new.json()["admin_of"] == "cluster"
