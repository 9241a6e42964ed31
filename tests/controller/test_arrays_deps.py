"""Job arrays, dependencies, holds and updates through a real HTTP server (uvicorn) and the real
scheduler cycle, on SQLite and PostgreSQL. The workers' side is played by the same service
verbs a compile server and a wafer worker call (claim, finish), so each test decides how a job
ends (succeeds, fails) and checks what the scheduler does next."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from sam_domain.compile import CompiledArtifact
from sam_server.controller.loop import run_cycle
from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from tests.api.helpers import ADMIN, MODEL_PY, bearer, spec
from tests.conftest import LiveServer

WAIT = ("queued", "pending")  # a gated job may have taken a twin's artifact: not placed either way


@pytest.fixture
def cluster_settings(settings, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "cluster.yaml"
    path.write_text("wafers:\n  - {id: w0, arch: wse2, rows: 64, cols: 64}\ncompile_servers: 1\n")
    return settings.model_copy(update={"cluster": path})


@pytest.fixture
def server(cluster_settings) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    with LiveServer(cluster_settings) as live:
        yield live


@pytest.fixture
def api(server) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _user(api: httpx.Client, tenant: str, name: str) -> dict[str, str]:
    if api.get(f"/api/v1/tenants/{tenant}", headers=ADMIN).status_code == 404:
        api.post("/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = api.post(f"/api/v1/tenants/{tenant}/users", json={"name": name}, headers=ADMIN)
    r.raise_for_status()
    return bearer(r.json()["token"])


def _submit(api: httpx.Client, who: dict[str, str], **keys: object) -> dict:  # type: ignore[type-arg]
    body = {"spec": {**spec(str(keys.pop("name", "job"))), **keys}, "files": {"model.py": MODEL_PY}}
    r = api.post("/api/v1/jobs", json=body, headers=who)
    assert r.status_code == 201, r.text
    return r.json()


def _jobs(settings) -> dict[str, Job]:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        jobs = list(s.execute(select(Job)).scalars())
        for job in jobs:
            s.expunge(job)
    return {j.id: j for j in jobs}


def _cycle(settings, outcome: dict[str, str] | None = None) -> dict[str, Job]:  # type: ignore[no-untyped-def]
    """One scheduler cycle, then the workers: every compile succeeds, every running job is
    claimed and ends with `outcome[id]` ("succeeded" by default, "keep" to leave it running)."""
    url = settings.resolved_database_url
    with session_scope(url) as s:
        lifecycle.heartbeat_wafer(s, wafer_id="w0", worker="t", arch="wse2", rows=64, cols=64)
    run_cycle(settings)
    for job in _jobs(settings).values():
        with session_scope(url) as s:
            if job.state == "compiling":
                assert lifecycle.claim_compile(s, job_id=job.id, owner="c", lease_s=30)
        if job.state == "compiling":
            with session_scope(url) as s:
                result = CompiledArtifact(f"k{job.compile_hash}", False, 0.1)
                lifecycle.finish_compile(s, job_id=job.id, owner="c", result=result)
    return _jobs(settings)


def _finish(settings, jobs: dict[str, Job], outcome: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    url = settings.resolved_database_url
    for job in jobs.values():
        if job.state != "running" or outcome.get(job.id, "succeeded") == "keep":
            continue
        with session_scope(url) as s:
            assert lifecycle.claim_run(
                s, job_id=job.id, attempt=job.attempts, wafer_id="w0", owner="w", lease_s=30
            )
        end = outcome.get(job.id, "succeeded")
        error = ("model_error", "boom") if end == "failed" else None
        with session_scope(url) as s:
            lifecycle.finish_run(
                s, job_id=job.id, owner="w", attempt=job.attempts, outcome=end, error=error
            )


def _reasons(api: httpx.Client, who: dict[str, str], job_id: str) -> list[str]:
    r = api.get(f"/api/v1/jobs/{job_id}/explain", headers=who)
    r.raise_for_status()
    return [x["code"] for x in r.json()["reasons"]]


def test_array_of_100_with_limit_10_never_runs_more_than_10_and_compiles_once(
    api, cluster_settings
):
    alice = _user(api, "lab", "alice")
    sweep = spec("sweep-${SAM_ARRAY_TASK_ID}")["model"]
    array = _submit(api, alice, name="sweep-${SAM_ARRAY_TASK_ID}", model=sweep, array="0-99%10")
    array_id = array["id"]
    assert array["array"] == {"indices": "0-99%10", "tasks": 100, "max_running": 10}
    listed = api.get("/api/v1/jobs", params={"limit": 500, "arrays": "expand"}, headers=alice)
    page = listed.json()["items"]
    assert sorted(j["array_task_id"] for j in page) == list(range(100))
    assert {j["name"] for j in page} == {f"sweep-{i}" for i in range(100)}
    most = 0
    for _ in range(40):
        jobs = _cycle(cluster_settings)
        running = [j for j in jobs.values() if j.state == "running"]
        most = max(most, len(running))
        assert len(running) <= 10
        if all(j.state == "succeeded" for j in jobs.values()):
            break
        waiting = [j for j in jobs.values() if j.state in ("queued", "pending")]
        if waiting and len(running) == 10:
            assert {j.reason for j in waiting} == {"JobArrayTaskLimit"}
        _finish(cluster_settings, jobs, {})
    jobs = _jobs(cluster_settings)
    assert all(j.state == "succeeded" for j in jobs.values()), "every task ran"
    assert most == 10, "the %10 limit is reached, not undershot"
    compiled = [j for j in jobs.values() if j.compile_cache_hit is False]
    assert len(compiled) == 1, "100 tasks with equal compile inputs share one compile"
    assert {j.array_job_id for j in jobs.values()} == {array_id}


def test_array_task_and_whole_array_cancel_and_hold(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    array_id = _submit(api, alice, array="1,3,5-9")["id"]
    r = api.post(f"/api/v1/jobs/{array_id}_3/cancel", headers=alice)
    assert r.status_code == 202 and r.json()["state"] == "cancelled"
    r = api.post(f"/api/v1/jobs/{array_id}/hold", headers=alice)
    assert r.status_code == 200 and len(r.json()["changed"]) == 6
    assert [u["id"] for u in r.json()["unchanged"]] == [f"{array_id}_3"]
    jobs = _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert not [j for j in jobs.values() if j.state == "running"], "held tasks are not placed"
    assert _reasons(api, alice, f"{array_id}_7") == ["JobHeldUser"]
    api.post(f"/api/v1/jobs/{array_id}_7/release", headers=alice).raise_for_status()
    _cycle(cluster_settings)  # compiled once released
    jobs = _cycle(cluster_settings)
    assert [j.id for j in jobs.values() if j.state == "running"] == [f"{array_id}_7"]
    r = api.post(f"/api/v1/jobs/{array_id}/cancel", headers=alice)
    assert r.status_code == 202
    assert {j.state for j in _jobs(cluster_settings).values()} <= {"cancelled", "cancelling"}


def test_afterok_waits_for_success_and_never_after_a_failure(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    first = _submit(api, alice, name="prep")["id"]
    train = _submit(api, alice, name="train", dependency=f"afterok:{first}")["id"]
    other = _submit(api, alice, name="other")["id"]
    after_fail = _submit(api, alice, name="eval", dependency=f"afterok:{other}")["id"]
    killed = _submit(
        api, alice, name="eval2", dependency=f"afterok:{other}", kill_invalid_depend=True
    )["id"]
    _cycle(cluster_settings)  # compiles
    jobs = _cycle(cluster_settings)
    assert jobs[first].state == "running" and jobs[other].state == "running"
    assert jobs[train].state in WAIT and _reasons(api, alice, train) == ["Dependency"]
    queue = {i["id"]: i for i in api.get("/api/v1/queue", headers=alice).json()["items"]}
    assert queue[train]["reason"] == "Dependency"
    _finish(cluster_settings, jobs, {other: "failed", first: "keep"})
    jobs = _cycle(cluster_settings)
    assert jobs[train].state in WAIT, "afterok waits while the first job runs"
    assert jobs[after_fail].state in WAIT
    assert _reasons(api, alice, after_fail) == ["DependencyNeverSatisfied"]
    assert jobs[killed].state == "cancelled", "kill_invalid_depend cancels it"
    assert jobs[killed].reason == "DependencyNeverSatisfied"
    _finish(cluster_settings, jobs, {})
    _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert jobs[first].state == "succeeded" and jobs[train].state == "running"
    assert jobs[after_fail].state in WAIT


def test_afternotok_afterany_singleton_and_bad_dependencies(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    a = _submit(api, alice, name="a")["id"]
    notok = _submit(api, alice, name="n", dependency=f"afternotok:{a}")["id"]
    anyend = _submit(api, alice, name="x", dependency=f"afterany:{a}")["id"]
    single = _submit(api, alice, name="a", dependency="singleton")["id"]
    _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert jobs[a].state == "running"
    assert {jobs[i].state for i in (notok, anyend, single)} <= set(WAIT)
    _finish(cluster_settings, jobs, {a: "failed"})
    _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert {jobs[i].state for i in (notok, anyend, single)} == {"running"}
    for bad, field_text in (
        ("afterok:jnosuchjob", "no job jnosuchjob"),
        ("after:x", "not one of"),
        ("afterok", "needs at least one job id"),
    ):
        body = {"spec": {**spec(), "dependency": bad}, "files": {"model.py": MODEL_PY}}
        r = api.post("/api/v1/jobs", json=body, headers=alice)
        assert r.status_code == 422 and field_text in r.json()["detail"], r.text
    bob = _user(api, "other", "bob")
    body = {"spec": {**spec(), "dependency": f"afterok:{a}"}, "files": {"model.py": MODEL_PY}}
    assert api.post("/api/v1/jobs", json=body, headers=bob).status_code == 422, (
        "another tenant's job id is unknown"
    )


def test_hold_keeps_a_job_out_until_release_and_admin_holds_need_an_admin(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    held = _submit(api, alice, hold=True)
    assert held["hold"] == "user"
    jobs = _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert jobs[held["id"]].state == "queued", "a held job is not even compiled"
    assert _reasons(api, alice, held["id"]) == ["JobHeldUser"]
    api.post(f"/api/v1/jobs/{held['id']}/release", headers=alice).raise_for_status()
    _cycle(cluster_settings)
    assert _cycle(cluster_settings)[held["id"]].state == "running"
    assert api.post(f"/api/v1/jobs/{held['id']}/hold", headers=alice).status_code == 409
    job = _submit(api, alice)["id"]
    api.post(f"/api/v1/jobs/{job}/hold", headers=ADMIN).raise_for_status()
    _cycle(cluster_settings)
    assert _reasons(api, alice, job) == ["JobHeldAdmin"]
    assert api.post(f"/api/v1/jobs/{job}/release", headers=alice).status_code == 403
    assert _cycle(cluster_settings)[job].state in WAIT
    api.post(f"/api/v1/jobs/{job}/release", headers=ADMIN).raise_for_status()
    _cycle(cluster_settings)
    assert _cycle(cluster_settings)[job].state == "running"


def test_requeue_gives_the_region_back_and_requeue_hold_keeps_it_waiting(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    job = _submit(api, alice)["id"]
    jobs = _cycle(cluster_settings)
    jobs = _cycle(cluster_settings)
    assert jobs[job].state == "running"
    r = api.post(f"/api/v1/jobs/{job}/requeue", params={"hold": "true"}, headers=alice)
    assert r.status_code == 200 and r.json()["changed"][0]["hold"] == "user"
    url = cluster_settings.resolved_database_url
    with session_scope(url) as s:  # the wafer worker sees the flag and checkpoints
        assert lifecycle.claim_run(s, job_id=job, attempt=1, wafer_id="w0", owner="w", lease_s=30)
    with session_scope(url) as s:
        assert lifecycle.read_flags(s, job_id=job, owner="w") == {"cancel": False, "preempt": True}
        lifecycle.finish_run(s, job_id=job, owner="w", attempt=1, outcome="preempted")
    jobs = _cycle(cluster_settings)
    assert jobs[job].state == "pending" and jobs[job].reason == "JobHeldUser"
    api.post(f"/api/v1/jobs/{job}/release", headers=alice).raise_for_status()
    assert _cycle(cluster_settings)[job].state == "running"
    pending = _submit(api, alice)["id"]
    assert api.post(f"/api/v1/jobs/{pending}/requeue", headers=alice).status_code == 409


def test_update_users_lower_admins_raise(api, cluster_settings):
    alice = _user(api, "lab", "alice")
    carol = _user(api, "lab", "carol")
    job = _submit(api, alice, priority="high")["id"]
    raise_it = api.patch(f"/api/v1/jobs/{job}", json={"priority": "urgent"}, headers=alice)
    assert raise_it.status_code == 403 and "admin" in raise_it.json()["detail"]
    r = api.patch(f"/api/v1/jobs/{job}", json={"priority": "low", "name": "renamed"}, headers=alice)
    assert r.status_code == 200
    assert (r.json()["changed"][0]["priority"], r.json()["changed"][0]["name"]) == (
        "low",
        "renamed",
    )
    assert (
        api.patch(f"/api/v1/jobs/{job}", json={"priority": "normal"}, headers=alice).status_code
        == 403
    )
    assert (
        api.patch(f"/api/v1/jobs/{job}", json={"time_limit": "1m"}, headers=alice).status_code
        == 200
    )
    assert (
        api.patch(f"/api/v1/jobs/{job}", json={"time_limit": "2h"}, headers=alice).status_code
        == 403
    )
    assert (
        api.patch(f"/api/v1/jobs/{job}", json={"priority": "low"}, headers=carol).status_code == 403
    ), "another user of the tenant may not change alice's job"
    r = api.patch(
        f"/api/v1/jobs/{job}", json={"priority": "urgent", "time_limit": "2h"}, headers=ADMIN
    )
    assert r.status_code == 200 and r.json()["changed"][0]["priority"] == "urgent"
    assert _jobs(cluster_settings)[job].time_limit_s == 7200
    bad = api.patch(f"/api/v1/jobs/{job}", json={"time_limit": "soon"}, headers=alice)
    assert bad.status_code == 422 and "90s, 30m, 2h" in bad.json()["detail"]
    bob = _user(api, "other", "bob")
    assert api.patch(f"/api/v1/jobs/{job}", json={"name": "x"}, headers=bob).status_code == 404
