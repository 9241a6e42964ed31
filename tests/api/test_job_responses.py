"""Every job answer (submit, replay, dry run, array, get, list, cancel) against its declared
response model, strictly, through a real server (uvicorn) on SQLite and PostgreSQL.

The routes answer with ready JSON (no re-validation at run time, for speed), so these tests are
what holds the OpenAPI models and the built views together: a field returned but not declared,
declared but not returned, or of another type fails here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import BaseModel, ValidationError

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.schemas.jobs import ArraySubmitted, DryRun, JobRead, RegionRead
from sam_server.schemas.listing import JobListPage as JobPage
from sam_server.services.transitions import transition
from tests.api.helpers import MODEL_PY, make_tenant, make_user, spec, submit

M = TypeVar("M", bound=BaseModel)


def strictly(model: type[M], body: dict[str, Any]) -> M:
    """`body` parsed by `model` in strict mode (no coercion, no unknown field) and equal to the
    model's own rendering of it (so no declared field is missing either)."""
    parsed = model.model_validate_json(json.dumps(body), strict=True)
    assert parsed.model_dump(mode="json") == body
    return parsed


@pytest.fixture
def api(live_server) -> httpx.Client:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        yield client


def test_strictly_rejects_an_undeclared_or_missing_field() -> None:
    region = {"wafer": "w0", "row": 0, "col": 0, "rows": 2, "cols": 2}
    strictly(RegionRead, region)
    with pytest.raises(ValidationError):
        strictly(RegionRead, {**region, "arch": "wse2"})
    with pytest.raises(ValidationError):
        strictly(RegionRead, {**region, "rows": "2"})
    with pytest.raises(ValidationError):
        strictly(RegionRead, {k: v for k, v in region.items() if k != "wafer"})


def test_submit_replay_dry_run_and_array_answers_match_their_models(api) -> None:  # type: ignore[no-untyped-def]
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    r = submit(api, alice)
    assert r.status_code == 201, r.text
    first = strictly(JobRead, r.json())
    # The submit's answer is built from the values written: it is the stored job, exactly.
    assert api.get(f"/api/v1/jobs/{first.id}", headers=alice).json() == r.json()
    # A field the model declares with a default must still be sent.
    with pytest.raises(AssertionError):
        strictly(JobRead, {k: v for k, v in r.json().items() if k != "hold"})

    held = submit(api, alice, spec("h", hold=True, dependency=f"afterok:{first.id}"))
    assert held.status_code == 201, held.text
    job = strictly(JobRead, held.json())
    assert (job.hold, job.dependency) == ("user", f"afterok:{first.id}")
    assert api.get(f"/api/v1/jobs/{job.id}", headers=alice).json() == held.json()

    key = {**alice, "Idempotency-Key": "k1"}
    created, replayed = submit(api, key, spec("i")), submit(api, key, spec("i"))
    assert (created.status_code, replayed.status_code) == (201, 200)
    assert strictly(JobRead, replayed.json()) == strictly(JobRead, created.json())

    body = {"spec": spec(), "files": {"model.py": MODEL_PY}}
    dry = api.post("/api/v1/jobs?dry_run=true", json=body, headers=alice)
    assert dry.status_code == 200, dry.text
    assert strictly(DryRun, dry.json()).region == {"rows": 4, "cols": 4}

    array = submit(api, alice, spec("sweep", array="0-3%2"))
    assert array.status_code == 201, array.text
    assert strictly(ArraySubmitted, array.json()).array.tasks == 4


def test_get_list_and_cancel_answers_match_the_model_in_every_shape(api, settings) -> None:  # type: ignore[no-untyped-def]
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    ids = [submit(api, alice, spec(f"j{i}")).json()["id"] for i in range(3)]
    running, failed, queued = ids
    # Fill what a worker would (region, progress, compile, error) so every nested part shows.
    with session_scope(settings.resolved_database_url) as s:
        job = s.get(Job, running)
        assert job is not None
        for state in ("compiling", "pending"):
            transition(s, job, state)
        job.wafer_id, job.region_row, job.region_col = "wafer-0", 2, 3
        job.region_rows, job.region_cols = 4, 4
        job.compile_cache_hit, job.compile_key, job.compile_seconds = True, "abc123", 1.25
        job.progress_step, job.progress_loss = 7, 0.5
        transition(s, job, "running")
        job = s.get(Job, failed)
        assert job is not None
        transition(s, job, "compiling")
        job.error_kind, job.error_message = "compile_oom", "x" * 5000
        transition(s, job, "failed")
        job.history_purged_at = datetime.now(UTC)

    shown = {i: strictly(JobRead, api.get(f"/api/v1/jobs/{i}", headers=alice).json()) for i in ids}
    assert shown[running].region == RegionRead(wafer="wafer-0", row=2, col=3, rows=4, cols=4)
    assert shown[running].compile is not None and shown[running].progress.loss == 0.5
    assert shown[failed].error is not None and shown[failed].history_purged_at is not None

    page = api.get("/api/v1/jobs", params={"limit": 2}, headers=alice).json()
    first_page = strictly(JobPage, page)
    rest = strictly(
        JobPage,
        api.get("/api/v1/jobs", params={"cursor": first_page.next_cursor}, headers=alice).json(),
    )
    listed = {j.id: j for j in [*first_page.items, *rest.items]}
    assert set(listed) == set(ids) and rest.next_cursor is None
    # A listing is the job as shown alone, with the error message cut short.
    error = listed[failed].error
    assert error is not None and len(error.message) < 5000
    assert listed[running].model_dump(exclude={"summary"}) == shown[running].model_dump()
    assert listed[running].summary is None  # a single job; an array's collapsed row has one

    r = api.post(f"/api/v1/jobs/{queued}/cancel", headers=alice)
    assert r.status_code == 202 and strictly(JobRead, r.json()).state == "cancelled"


def test_a_runner_jobs_script_and_args_are_its_own_field(api) -> None:  # type: ignore[no-untyped-def]
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    runner_spec = {
        "name": "train",
        "entry": {"script": "train.py", "args": ["--epochs", "2"]},
        "data": {"batch_size": 4},
        "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
    }
    r = submit(api, alice, runner_spec, files={"train.py": "from sam import Runner\n"})
    assert r.status_code == 201, r.text
    job = strictly(JobRead, r.json())
    assert job.entry is not None and (job.entry.script, job.entry.args) == (
        "train.py",
        ["--epochs", "2"],
    )
    assert api.get(f"/api/v1/jobs/{job.id}", headers=alice).json() == r.json()
    model_job = strictly(JobRead, submit(api, alice).json())
    assert model_job.entry is None
    # listings leave the spec unread: the field is there, null
    items = strictly(JobPage, api.get("/api/v1/jobs", headers=alice).json()).items
    assert [j.entry for j in items] == [None, None]
