"""GET /jobs at volume: an array's waiting tasks as one Slurm-style row (counts by state and
reason), `arrays=expand`, the slim view, keyset pages over jobs and arrays together, the `job`
filter and the bounds of every parameter, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
from typing import Any

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.schemas.listing import SLIM_COLUMNS, JobListPage
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, spec, submit


def _jobs(client, headers, **params: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    r = client.get("/api/v1/jobs", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _every(client, headers, **params: Any) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Every item (full view) or row as a dict (slim view), page after page."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = _jobs(client, headers, **params, **({"cursor": cursor} if cursor else {}))
        if "rows" in page:
            out += [dict(zip(page["columns"], row, strict=True)) for row in page["rows"]]
        else:
            JobListPage.model_validate(page)
            out += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return out


def _array(client, headers, indices: str, name: str = "sweep") -> str:  # type: ignore[no-untyped-def]
    made = submit(client, headers, spec(name, array=indices))
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _move(settings, job_id: str, *states: str) -> None:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        job = s.get(Job, job_id)
        assert job is not None
        for state in states:
            transition(s, job, state)


def test_an_arrays_waiting_tasks_are_one_row_and_expand_on_request(client, settings) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    single = submit(client, alice).json()["id"]
    array = _array(client, alice, "0-4,7,9-11")
    _move(settings, f"{array}_3", "compiling")
    _move(settings, f"{array}_10", "compiling", "pending", "running")
    assert client.post(f"/api/v1/jobs/{array}_7/cancel", headers=alice).status_code == 202
    assert client.post(f"/api/v1/jobs/{array}_11/hold", headers=alice).status_code == 200

    listed = {j["id"]: j for j in _every(client, alice)}
    collapsed = f"{array}_[0-4,9,11]"
    assert set(listed) == {single, collapsed, f"{array}_10", f"{array}_7"}
    row = listed[collapsed]
    assert row["summary"] == {
        "indices": "0-4,9,11",
        "tasks": 7,
        "states": {"queued": 6, "compiling": 1},
        "reasons": {"CompilePending": 6, "JobHeldUser": 1},
    }
    assert (row["state"], row["array_job_id"], row["array_task_id"]) == ("queued", array, None)
    assert row["name"] == "sweep" and row["user"] == "alice" and row["tenant"] == "lab"
    assert listed[f"{array}_10"]["state"] == "running" and listed[single]["summary"] is None

    waiting = {j["id"] for j in _every(client, alice, state=["queued"])}
    assert waiting == {single, f"{array}_[0-2,4,9,11]"}
    expanded = {j["id"] for j in _every(client, alice, arrays="expand")}
    assert expanded == {single} | {f"{array}_{i}" for i in (0, 1, 2, 3, 4, 7, 9, 10, 11)}
    assert {j["id"] for j in _every(client, alice, job=[array], arrays="expand")} == expanded - {
        single
    }
    assert {j["id"] for j in _every(client, alice, job=[array])} == set(listed) - {single}
    assert [j["id"] for j in _every(client, alice, job=[single])] == [single]


def test_slim_rows_hold_the_full_items_values(client, settings) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    running = submit(client, alice).json()["id"]
    _move(settings, running, "compiling", "pending")
    with session_scope(settings.resolved_database_url) as s:
        job = s.get(Job, running)
        assert job is not None
        job.wafer_id, job.region_row, job.region_col, job.region_rows, job.region_cols = (
            "wafer-0",
            1,
            2,
            4,
            4,
        )
        job.progress_step, job.progress_loss = 5, 0.25
        transition(s, job, "running")
    array = _array(client, alice, "0-9999:1000")
    full = {j["id"]: j for j in _every(client, alice)}
    page = _jobs(client, alice, view="slim")
    assert page["columns"] == list(SLIM_COLUMNS) and page["next_cursor"] is None
    slim = {r["id"]: r for r in (dict(zip(SLIM_COLUMNS, row, strict=True)) for row in page["rows"])}
    # every task of the array waits: its indices as submitted, Slurm's way
    assert set(slim) == set(full) == {running, f"{array}_[0-9999:1000]"}
    for job_id, item in full.items():
        row = slim[job_id]
        for key in ("name", "tenant", "user", "state", "priority", "mode", "created_at"):
            assert row[key] == item[key], key
        for key in ("started_at", "finished_at", "attempts", "reason", "hold", "region"):
            assert row[key] == item[key], key
        assert (row["step"], row["loss"]) == (item["progress"]["step"], item["progress"]["loss"])
        assert row["summary"] == item["summary"]
    assert slim[running]["region"] == {"wafer": "wafer-0", "row": 1, "col": 2, "rows": 4, "cols": 4}


def test_pages_walk_jobs_and_arrays_once_each_newest_first(client) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    made = []
    for n in range(3):
        made.append(submit(client, alice, spec(f"single-{n}")).json()["id"])
        made.append(f"{_array(client, alice, f'0-{n + 1}', f'array-{n}')}_[0-{n + 1}]")
    made.reverse()  # newest first
    for view in ("full", "slim"):
        for limit in (1, 2, 5):
            walked = [j["id"] for j in _every(client, alice, limit=limit, view=view)]
            assert walked == made, (view, limit)


def test_other_tenants_see_nothing_of_an_array_and_the_admin_sees_it(client) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    make_tenant(client, "other")
    alice = make_user(client, "lab", "alice")
    eve = make_user(client, "other", "eve")
    array = _array(client, alice, "0-9")
    assert _every(client, eve) == [] and _every(client, eve, job=[array], arrays="expand") == []
    assert [j["id"] for j in _every(client, ADMIN, tenant="lab")] == [f"{array}_[0-9]"]
    assert _every(client, ADMIN, tenant="other") == []
    assert [j["id"] for j in _every(client, ADMIN, user="alice", view="slim")] == [f"{array}_[0-9]"]


def test_bad_limits_cursors_and_modes_are_4xx_naming_the_parameter(client) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    submit(client, alice)
    cap = client.get("/api/v1/jobs", params={"limit": 501}, headers=alice)
    assert cap.status_code == 422 and "limit" in cap.text and "view=slim" in cap.text
    assert (
        client.get(
            "/api/v1/jobs", params={"limit": 10_000, "view": "slim"}, headers=alice
        ).status_code
        == 200
    )
    too_many = client.get("/api/v1/jobs", params={"limit": 10_001, "view": "slim"}, headers=alice)
    assert too_many.status_code == 422 and "10000" in too_many.text
    huge = base64.urlsafe_b64encode(f"{10**30}:jx".encode()).decode()
    for cursor in ("not-a-cursor", huge, "x" * 201):
        r = client.get("/api/v1/jobs", params={"cursor": cursor}, headers=alice)
        assert r.status_code in (400, 422) and "cursor" in r.text, r.text
    for params in ({"arrays": "fold"}, {"view": "tiny"}, {"limit": 10**30}):
        r = client.get("/api/v1/jobs", params=params, headers=alice)
        assert r.status_code == 422, (params, r.text)
