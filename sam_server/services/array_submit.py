"""Submit a job array: one request, one transaction, every task in two bulk INSERTs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.db.models import Job, JobArray
from sam_server.errors import InvalidSpec, JobNotFound
from sam_server.schemas.job_spec import JobSpec
from sam_server.schemas.jobs import iso
from sam_server.services.arrays import (
    MAX_ARRAY_TASKS,
    add_array,
    has_placeholders,
    insert_events,
    insert_tasks,
    parse_array,
    placeholder_tree,
    placeholders_reach_compile,
    seq_base,
    substitute,
    substitute_tree,
    task_values,
)
from sam_server.services.auth import Principal
from sam_server.services.bulk import Pace
from sam_server.services.directives import Directives
from sam_server.services.jobs import (
    Submitted,
    check_queued_quota,
    check_submittable,
    compile_hash,
    new_job_id,
    new_job_values,
)
from sam_server.services.spec_check import check_files, parse_spec
from sam_server.states import JobState


def submit_array(
    session: Session,
    *,
    principal: Principal,
    raw: dict[str, Any],
    directives: Directives,
    files: dict[str, str],
    idempotency_key: str | None,
    digest: str,
    check_first: Callable[[JobSpec], None] | None = None,
    settings: Settings | None = None,
) -> Submitted:
    """Store every task of `directives.array` in state `queued` (nothing on rejection).

    A spec without `${SAM_ARRAY_*}` is validated and hashed once for all tasks; with them each
    task's spec is validated (an error names the task). Files are stored once, on the array.
    Every check runs before the first write; the tasks are then written `bulk_chunk_rows` to a
    transaction (with settings; without, all in the caller's one transaction), so a large
    array never holds the database for long.
    """
    max_tasks = settings.api.max_array_tasks if settings is not None else MAX_ARRAY_TASKS
    array = parse_array(directives.array or "", max_tasks=max_tasks)
    array_id = new_job_id()
    count = len(array.indices)
    templated = has_placeholders(raw)
    first = _task_spec(raw, array_id, array.indices[0], count, templated)
    check_files(first, files)
    check_submittable(session, principal, first)
    if check_first is not None:  # the submit's own checks (its data sets)
        check_first(first)
    default_limit = settings.api.max_queued_jobs if settings is not None else None
    check_queued_quota(session, principal, adding=count, default_limit=default_limit)
    base = new_job_values(principal, first, files, None, digest)
    # The files are stored once, on the array (lifecycle reads them from there).
    base.update(directives.columns(), array_max_running=array.max_running, files={})
    add_array(session, array_id=array_id, head=base, array=array, files=files)
    start = seq_base()
    # Per task only the columns that differ; with ${SAM_ARRAY_*} in the spec also those that
    # follow from each task's own spec. The rest are written once for the whole array.
    varying = VARYING + (SPEC_COLUMNS if templated else ())
    constant = {k: v for k, v in base.items() if k not in varying}
    constant["array_job_id"] = array_id
    spec_head = json.dumps(base["spec"])[:-1]  # the spec's JSON without its closing brace
    same_hash = not templated or not placeholders_reach_compile(raw)
    tree = placeholder_tree(raw) if templated else None
    rows: list[tuple[Any, ...]] = []
    per_spec: tuple[Any, ...] = ()
    for offset, index in enumerate(array.indices):
        if templated:
            parsed = (
                first if offset == 0 else _task_spec(raw, array_id, index, count, templated, tree)
            )
            spec, per_spec = _per_spec_values(
                parsed, files, principal.tenant_id, base["compile_hash"] if same_hash else None
            )
            spec_head = json.dumps(spec)[:-1]
        # The spec as stored: JSON text with the task's place in the array (the sandbox's
        # SAM_ARRAY_* variables), as json.dumps writes it; array ids are [a-z0-9] only.
        task = f'{{"array_job_id": "{array_id}", "task_id": {index}, "task_count": {count}}}'
        rows.append(
            (
                f"{array_id}_{index}",
                start + offset,
                f'{spec_head}, "array_task": {task}}}',
                index,
                idempotency_key if offset == 0 else None,
                *per_spec,
            )
        )
    event = {"at": base["created_at"], "from_state": None, "to_state": JobState.QUEUED.value}
    who = f"submitted by {principal.name} (array {array_id}, task "
    pace = Pace.of(settings, session) if settings is not None else Pace(commit=False)
    for start in range(0, len(rows), pace.chunk_rows):
        if start and pace.pause_s:
            time.sleep(pace.pause_s)
        chunk = rows[start : start + pace.chunk_rows]
        insert_tasks(session, constant, varying, chunk)
        events = [(job_id, f"{who}{job_id.rpartition('_')[2]})") for job_id, *_ in chunk]
        insert_events(session, event, events)
        if pace.commit:
            session.commit()
    return Submitted(_view(array_id, base, array.text, count, principal), created=True)


# The columns that differ between the tasks of one array (in the order of insert_tasks' row
# tuples); with ${SAM_ARRAY_*} in the spec, also those that follow from each task's own spec.
VARYING = ("id", "seq", "spec", "array_task_id", "idempotency_key")
SPEC_COLUMNS = (
    "name",
    "priority",
    "req_rows",
    "req_cols",
    "time_limit_s",
    "total_steps",
    "compile_hash",
)


def _task_spec(
    raw: dict[str, Any],
    array_id: str,
    index: int,
    count: int,
    templated: bool,
    tree: dict[Any, Any] | None = None,
) -> JobSpec:
    """Task `index`'s spec, validated; `tree`: `placeholder_tree(raw)`, computed once."""
    if not templated:
        return parse_spec(raw)
    try:
        values = task_values(array_id, index, count)
        return parse_spec(substitute_tree(raw, tree, values) if tree else substitute(raw, values))
    except InvalidSpec as exc:
        raise InvalidSpec(f"array task {index}: {exc.detail}", errors=exc.errors) from exc


def _per_spec_values(
    parsed: JobSpec, files: dict[str, str], tenant_id: int | None, same_hash: str | None
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """(the task's spec as stored, its SPEC_COLUMNS values). `same_hash`: the compile hash when
    the placeholders reach no compile input (every task shares it), else None: hashed here."""
    rows, cols = parsed.resources.shape()
    dumped = parsed.model_dump(mode="json", by_alias=True)
    return dumped, (
        parsed.name,
        parsed.priority,
        rows,
        cols,
        parsed.resources.time_limit,
        parsed.run_options.total_steps if parsed.mode == "train" else 0,
        same_hash or compile_hash(parsed, files, tenant_id, dumped=dumped),
    )


def _view(
    array_id: str, base: dict[str, Any], indices: str, count: int, principal: Principal
) -> dict[str, object]:
    return _answer(
        array_id,
        base["name"],
        principal.tenant,
        principal.name,
        base["created_at"],
        {"indices": indices, "tasks": count, "max_running": base["array_max_running"]},
    )


def array_view(session: Session, array_id: str) -> dict[str, object]:
    """The submit answer of an existing array (an Idempotency-Key replay)."""
    row = session.get(JobArray, array_id)
    if row is None:
        raise JobNotFound(f"no array {array_id!r}")
    first = session.execute(
        select(Job).where(Job.array_job_id == array_id).order_by(Job.array_task_id).limit(1)
    ).scalar_one()
    return _answer(
        array_id,
        row.name,
        first.tenant.name,
        first.user.name,
        row.created_at,
        {"indices": row.indices, "tasks": row.task_count, "max_running": row.max_running},
    )


def _answer(
    array_id: str,
    name: str,
    tenant: str | None,
    user: str,
    created_at: Any,
    array: dict[str, Any],
) -> dict[str, object]:
    """A submitted array's answer: the array as one queued job."""
    return {
        "id": array_id,
        "array_job_id": array_id,
        "name": name,
        "tenant": tenant,
        "user": user,
        "state": JobState.QUEUED.value,
        "created_at": iso(created_at),
        "array": array,
    }
