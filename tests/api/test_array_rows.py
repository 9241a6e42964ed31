"""The rows one array submit writes (PostgreSQL's COPY text, SQLite's INSERT with the shared
values as literals) read back exactly as the single-job path would have written each task."""

from __future__ import annotations

import json

from sqlalchemy import select

from sam_server.db.models import Job, JobEvent
from sam_server.db.session import session_scope
from sam_server.services.arrays import substitute, task_values
from sam_server.services.jobs import compile_hash
from sam_server.services.spec_check import parse_spec
from tests.api.helpers import MODEL_PY, make_tenant, make_user, spec, submit

# Characters that COPY text, SQL literals and %-parameters each treat specially.
AWKWARD = "it's 50% \\ done\tnow"


def _tasks(settings, array_id: str) -> list[Job]:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        query = select(Job).where(Job.array_job_id == array_id).order_by(Job.array_task_id)
        jobs = list(s.execute(query).scalars())
        s.expunge_all()
        return jobs


def test_every_task_row_is_the_job_the_spec_says(client, settings) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    raw = spec(
        "sweep-${SAM_ARRAY_TASK_ID}",
        train={"seed": "${SAM_ARRAY_TASK_ID}", "optimizer": {"name": "sgd", "lr": 0.1}},
        array="0-4:2%2",
        dependency="singleton",
    )
    made = submit(client, alice, raw)
    assert made.status_code == 201, made.text
    array_id = made.json()["id"]
    tasks = _tasks(settings, array_id)
    assert [t.array_task_id for t in tasks] == [0, 2, 4]
    hashes = set()
    for task in tasks:
        index = task.array_task_id
        assert task.id == f"{array_id}_{index}" and task.array_job_id == array_id
        plain = {k: v for k, v in raw.items() if k not in ("array", "dependency")}
        own = parse_spec(substitute(plain, task_values(array_id, index, 3)))
        stored = dict(task.spec)
        assert stored.pop("array_task") == {
            "array_job_id": array_id,
            "task_id": index,
            "task_count": 3,
        }
        expected = own.model_dump(mode="json", by_alias=True)
        expected.pop("array_task", None)
        assert stored == expected
        assert task.name == f"sweep-{index}" and stored["train"]["seed"] == index
        assert task.compile_hash == compile_hash(own, {"model.py": MODEL_PY}, task.tenant_id)
        hashes.add(task.compile_hash)
        assert (task.state, task.array_max_running, task.hold) == ("queued", 2, None)
        assert task.dependency is not None and task.files == {}
        assert task.created_at is not None and task.cancel_requested is False
    assert len(hashes) == 3, "a seed is a compile input: one hash per task"
    with session_scope(settings.resolved_database_url) as s:
        events = s.execute(
            select(JobEvent.job_id, JobEvent.reason, JobEvent.to_state).where(
                JobEvent.job_id.like(f"{array_id}_%")
            )
        ).all()
    assert sorted(events) == [
        (f"{array_id}_{i}", f"submitted by alice (array {array_id}, task {i})", "queued")
        for i in (0, 2, 4)
    ]


def test_shared_values_with_awkward_characters_survive_the_bulk_insert(client, settings) -> None:  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    alice = make_user(client, "lab", "alice")
    name = AWKWARD.replace("\t", " ")  # a name is one line; the model's kwargs take anything
    raw = spec(name, array="0-2")
    raw["model"]["kwargs"] = {"hidden": 16, "note": AWKWARD + "\n\\N"}
    made = submit(client, alice, raw)
    assert made.status_code == 201, made.text
    tasks = _tasks(settings, made.json()["id"])
    assert len(tasks) == 3
    for task in tasks:
        assert task.name == name
        assert task.spec["model"]["kwargs"]["note"] == AWKWARD + "\n\\N"
    # Names only: one compile hash for the whole array, the single-job path's.
    assert len({t.compile_hash for t in tasks}) == 1
    first = tasks[0]
    own = parse_spec({k: v for k, v in raw.items() if k != "array"})
    assert first.compile_hash == compile_hash(own, {"model.py": MODEL_PY}, first.tenant_id)
    assert json.loads(json.dumps(first.spec))["name"] == name


def test_substituting_only_the_placeholders_branches_gives_substitutes_result() -> None:
    from sam_server.services.arrays import placeholder_tree, substitute_tree

    raw = spec(
        "sweep-${SAM_ARRAY_TASK_ID}",
        train={
            "seed": "${SAM_ARRAY_TASK_ID}",
            "optimizer": {"name": "sgd", "lr": "1e-${SAM_ARRAY_TASK_ID}"},
        },
        data={
            "source": "synthetic",
            "input_shape": ["${SAM_ARRAY_TASK_COUNT}", 8],
            "note": "${HOME} stays",
            "tags": [{"k": "${SAM_ARRAY_JOB_ID}"}, "plain"],
        },
    )
    tree = placeholder_tree(raw)
    assert tree is not None and "resources" not in tree and "note" not in tree["data"]
    for index in (0, 7, 12345):
        values = task_values("jabc", index, 20)
        got = substitute_tree(raw, tree, values)
        assert got == substitute(raw, values)
        assert repr(got) == repr(substitute(raw, values))  # 1e-7 a float, the name a string
    assert raw["train"]["seed"] == "${SAM_ARRAY_TASK_ID}"  # the template itself is untouched
    assert placeholder_tree(spec("plain")) is None
