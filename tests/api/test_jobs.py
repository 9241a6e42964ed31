"""Submitting, listing, reading and cancelling jobs; tenant isolation; idempotency; quotas."""

from __future__ import annotations

import pytest

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, spec, submit


def _two_tenants(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "acme")
    make_tenant(client, "globex")
    return make_user(client, "acme", "alice"), make_user(client, "globex", "gina")


def test_submit_returns_queued_job_with_location(client):
    alice, _ = _two_tenants(client)
    r = submit(client, alice)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["state"] == "queued" and job["tenant"] == "acme" and job["user"] == "alice"
    assert r.headers["location"] == f"/api/v1/jobs/{job['id']}"
    assert job["progress"] == {"step": 0, "total_steps": 100, "loss": None}
    assert client.get(f"/api/v1/jobs/{job['id']}", headers=alice).json()["id"] == job["id"]


def test_other_tenants_job_is_404_for_read_and_cancel(client):
    alice, gina = _two_tenants(client)
    job_id = submit(client, alice).json()["id"]
    for path in ("", "/logs", "/metrics", "/explain", "/report"):
        assert client.get(f"/api/v1/jobs/{job_id}{path}", headers=gina).status_code == 404
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=gina).status_code == 404
    assert client.get(f"/api/v1/jobs/{job_id}", headers=alice).json()["state"] == "queued"
    assert client.get(f"/api/v1/jobs/{job_id}", headers=ADMIN).status_code == 200


def test_listing_is_per_tenant_and_admin_sees_all(client):
    alice, gina = _two_tenants(client)
    mine = {submit(client, alice, spec(f"a{i}")).json()["id"] for i in range(3)}
    theirs = {submit(client, gina, spec("g")).json()["id"]}
    listed = {j["id"] for j in client.get("/api/v1/jobs", headers=alice).json()["items"]}
    assert listed == mine
    every = {j["id"] for j in client.get("/api/v1/jobs", headers=ADMIN).json()["items"]}
    assert every == mine | theirs
    only = client.get("/api/v1/jobs", params={"tenant": "globex"}, headers=ADMIN).json()["items"]
    assert {j["id"] for j in only} == theirs


def test_cursor_pagination_walks_every_job_newest_first(client):
    alice, _ = _two_tenants(client)
    ids = [submit(client, alice, spec(f"j{i}")).json()["id"] for i in range(7)]
    seen, cursor = [], None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = client.get("/api/v1/jobs", params=params, headers=alice).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    assert client.get("/api/v1/jobs", params={"limit": 501}, headers=alice).status_code == 422


def test_state_filter_may_repeat(client, settings):
    alice, _ = _two_tenants(client)
    a = submit(client, alice, spec("a")).json()["id"]
    b = submit(client, alice, spec("b")).json()["id"]
    client.post(f"/api/v1/jobs/{b}/cancel", headers=alice)
    q = client.get("/api/v1/jobs", params=[("state", "queued")], headers=alice).json()["items"]
    assert [j["id"] for j in q] == [a]
    both = client.get(
        "/api/v1/jobs", params=[("state", "queued"), ("state", "cancelled")], headers=alice
    )
    assert {j["id"] for j in both.json()["items"]} == {a, b}


def test_idempotency_key_replays_and_rejects_other_body(client):
    alice, _ = _two_tenants(client)
    key = {"Idempotency-Key": "k-123"}
    r1 = client.post(
        "/api/v1/jobs",
        json={"spec": spec("x"), "files": {"model.py": "class Net: pass"}},
        headers=alice | key,
    )
    r2 = client.post(
        "/api/v1/jobs",
        json={"spec": spec("x"), "files": {"model.py": "class Net: pass"}},
        headers=alice | key,
    )
    assert r1.status_code == 201 and r2.status_code == 200
    assert r1.json()["id"] == r2.json()["id"]
    r3 = client.post(
        "/api/v1/jobs",
        json={"spec": spec("y"), "files": {"model.py": "class Net: pass"}},
        headers=alice | key,
    )
    assert r3.status_code == 422
    assert len(client.get("/api/v1/jobs", headers=alice).json()["items"]) == 1


def test_cancel_queued_ends_at_once_running_goes_cancelling_ended_is_409(client, settings):
    alice, _ = _two_tenants(client)
    queued = submit(client, alice, spec("q")).json()["id"]
    r = client.post(f"/api/v1/jobs/{queued}/cancel", headers=alice)
    assert r.status_code == 202 and r.json()["state"] == "cancelled"
    assert client.post(f"/api/v1/jobs/{queued}/cancel", headers=alice).status_code == 409
    running = submit(client, alice, spec("r")).json()["id"]
    with session_scope(settings.resolved_database_url) as s:
        job = s.get(Job, running)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
    r = client.post(f"/api/v1/jobs/{running}/cancel", headers=alice)
    assert r.status_code == 202 and r.json()["state"] == "cancelling"


def test_max_queued_jobs_is_429_and_frees_up_after_cancel(client):
    make_tenant(client, "small", max_queued_jobs=2)
    sam = make_user(client, "small", "sam")
    ids = [submit(client, sam, spec(f"s{i}")).json()["id"] for i in range(2)]
    over = submit(client, sam, spec("s3"))
    assert over.status_code == 429
    assert "max_queued_jobs" in over.json()["detail"]
    client.post(f"/api/v1/jobs/{ids[0]}/cancel", headers=sam)
    assert submit(client, sam, spec("s4")).status_code == 201


def test_region_that_can_never_run_is_422(client):
    make_tenant(client, "capped", max_pes=64)
    user = make_user(client, "capped", "u")
    too_many = submit(client, user, spec(resources={"region": {"rows": 16, "cols": 16}}))
    assert too_many.status_code == 422 and "max_pes" in too_many.json()["detail"]
    make_tenant(client, "open")
    other = make_user(client, "open", "o")
    huge = submit(client, other, spec(resources={"region": {"rows": 2000, "cols": 4}}))
    assert huge.status_code == 422 and "larger than every wafer" in huge.json()["detail"]
    assert client.get("/api/v1/jobs", headers=ADMIN).json()["items"] == []


def test_urgent_priority_is_for_admins(client):
    alice, _ = _two_tenants(client)
    assert submit(client, alice, spec(priority="urgent")).status_code == 403
    assert submit(client, alice, spec(priority="high")).status_code == 201


def test_dry_run_validates_without_creating(client):
    alice, _ = _two_tenants(client)
    body = {"spec": spec("dry"), "files": {"model.py": "class Net: pass"}}
    r = client.post("/api/v1/jobs", params={"dry_run": "true"}, json=body, headers=alice)
    assert r.status_code == 200 and r.json()["valid"] is True
    assert r.json()["region"] == {"rows": 4, "cols": 4}
    assert r.json()["spec"]["run_options"]["steps_per_epoch"] == 100
    assert client.get("/api/v1/jobs", headers=alice).json()["items"] == []


def test_job_ids_are_short_random_and_use_every_letter_in_every_position():
    import re

    from sam_server.services.jobs import _ID_ALPHABET, new_job_id

    ids = [new_job_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(f"j[{_ID_ALPHABET}]{{11}}", i) for i in ids)
    for pos in range(1, 12):  # no position is stuck or biased to a few letters
        assert {i[pos] for i in ids} == set(_ID_ALPHABET)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_concurrent_submits_all_get_an_answer_and_never_pass_max_queued_jobs(settings, concurrency):
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    limited = settings.updated(submit_concurrency=concurrency)
    with TestClient(create_app(limited)) as client:
        make_tenant(client, "busy", max_queued_jobs=3)
        who = make_user(client, "busy", "u")
        with ThreadPoolExecutor(12) as pool:
            codes = sorted(
                pool.map(lambda i: submit(client, who, spec(f"j{i}")).status_code, range(24))
            )
        assert codes == [201] * 3 + [429] * 21
        listed = client.get("/api/v1/jobs", headers=who).json()["items"]
        assert len(listed) == 3


def test_concurrent_retries_with_one_idempotency_key_make_one_job(client):
    from concurrent.futures import ThreadPoolExecutor

    make_tenant(client, "retry")
    who = {**make_user(client, "retry", "u"), "Idempotency-Key": "once"}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: submit(client, who, spec("same")), range(8)))
    assert sorted(r.status_code for r in answers) == [200] * 7 + [201]
    assert len({r.json()["id"] for r in answers}) == 1
    assert len(client.get("/api/v1/jobs", headers=who).json()["items"]) == 1
