"""Tenants, users and tokens: who may do what (docs/contract.md section 2)."""

from __future__ import annotations

from sqlalchemy import select

from sam_server.db.models import ApiToken
from sam_server.db.session import session_scope
from sam_server.services.auth import hash_token, revoke_token
from tests.api.helpers import ADMIN, bearer, make_tenant, make_user


def test_admin_creates_tenant_and_user_whose_token_works(client):
    make_tenant(client, "acme", max_pes=4096, max_queued_jobs=10, share=2)
    alice = make_user(client, "acme", "alice")
    me = client.get("/api/v1/whoami", headers=alice).json()
    assert me == {"name": "alice", "tenant": "acme", "role": "user"}
    tenant = client.get("/api/v1/tenants/acme", headers=alice).json()
    assert tenant["quota"] == {
        "max_pes": 4096,
        "max_running_jobs": None,
        "max_queued_jobs": 10,
        "max_storage_bytes": None,  # the server's SAM_MAX_STORAGE_BYTES
        "share": 2.0,
    }
    assert tenant["usage"]["queued_jobs"] == 0 and tenant["usage"]["storage_bytes"] == 0


def test_tokens_are_stored_only_as_hashes(client, settings):
    make_tenant(client, "acme")
    r = client.post("/api/v1/tenants/acme/users", json={"name": "bob"}, headers=ADMIN)
    token = r.json()["token"]
    assert token.startswith("sam_") and len(token) > 40
    with session_scope(settings.resolved_database_url) as s:
        stored = [t.token_hash for t in s.execute(select(ApiToken)).scalars()]
    assert hash_token(token) in stored
    assert token not in stored


def test_missing_bad_and_revoked_tokens_are_401(client, settings):
    make_tenant(client, "acme")
    r = client.post("/api/v1/tenants/acme/users", json={"name": "carol"}, headers=ADMIN)
    token = r.json()["token"]
    assert client.get("/api/v1/whoami").status_code == 401
    bad = client.get("/api/v1/whoami", headers=bearer("sam_nope"))
    assert bad.status_code == 401
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert client.get("/api/v1/whoami", headers=bearer(token)).status_code == 200
    with session_scope(settings.resolved_database_url) as s:
        revoke_token(s, token=token)
    assert client.get("/api/v1/whoami", headers=bearer(token)).status_code == 401


def test_user_cannot_call_admin_endpoints(client):
    make_tenant(client, "acme")
    alice = make_user(client, "acme", "alice")
    assert client.post("/api/v1/tenants", json={"name": "evil"}, headers=alice).status_code == 403
    r = client.put("/api/v1/tenants/acme/quota", json={"max_pes": 1}, headers=alice)
    assert r.status_code == 403
    r = client.post("/api/v1/tenants/acme/users", json={"name": "mallory"}, headers=alice)
    assert r.status_code == 403


def test_user_sees_only_own_tenant(client):
    make_tenant(client, "acme")
    make_tenant(client, "globex")
    alice = make_user(client, "acme", "alice")
    names = [t["name"] for t in client.get("/api/v1/tenants", headers=alice).json()]
    assert names == ["acme"]
    assert client.get("/api/v1/tenants/globex", headers=alice).status_code == 404
    all_names = [t["name"] for t in client.get("/api/v1/tenants", headers=ADMIN).json()]
    assert all_names == ["acme", "globex"]


def test_duplicate_tenant_is_409_and_quota_update_applies(client):
    make_tenant(client, "acme")
    r = client.post("/api/v1/tenants", json={"name": "acme"}, headers=ADMIN)
    assert r.status_code == 409
    r = client.put("/api/v1/tenants/acme/quota", json={"max_running_jobs": 3}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["quota"]["max_running_jobs"] == 3


def test_health_ready_metrics_and_docs_need_no_token(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["database"] == "ok"
    assert "sam_jobs" in client.get("/metrics").text
    assert client.get("/docs").status_code == 200
    assert "/api/v1/jobs" in client.get("/openapi.json").json()["paths"]


def test_a_write_is_committed_before_its_answer_so_the_next_call_sees_it(live_server):
    """Over a real HTTP server: a token is usable the moment its 201 arrives, and a cancelled
    job reads as cancelled right after the cancel's answer (no commit after the response)."""
    import httpx

    from tests.api.helpers import submit

    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        make_tenant(client, "rw")
        for i in range(40):
            who = make_user(client, "rw", f"u{i}")
            assert client.get("/api/v1/whoami", headers=who).status_code == 200, i
        for _ in range(10):
            job = submit(client, who).json()["id"]
            assert client.post(f"/api/v1/jobs/{job}/cancel", headers=who).status_code == 202
            assert client.get(f"/api/v1/jobs/{job}", headers=who).json()["state"] == "cancelled"
