"""Job arrays (Slurm's `--array`): the index syntax, `${SAM_ARRAY_*}` substitution in a spec's
values, and the one-request bulk insert of every task.

A task is an ordinary job whose id is `<array id>_<index>` (`sam cancel j…_7` names one task,
`sam cancel j…` the whole array). The array's uploaded files live once in `job_arrays`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobArray, JobEvent
from sam_server.errors import InvalidSpec

# Slurm's default MaxArraySize is 1001; SAM's sweeps are cheap rows, so it allows more.
MAX_ARRAY_INDEX = 999_999
MAX_ARRAY_TASKS = 100_000
_PLACEHOLDER = re.compile(r"\$\{(SAM_ARRAY_TASK_ID|SAM_ARRAY_JOB_ID|SAM_ARRAY_TASK_COUNT)\}")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
_TASK_ID = re.compile(r"^(?P<array>[a-z0-9]+)_(?P<task>\d+)$")


@dataclass(frozen=True)
class ArraySpec:
    """A parsed `--array` value: the task indices (sorted, unique) and the `%N` limit."""

    indices: tuple[int, ...]
    max_running: int | None
    text: str


def _array_error(text: str, why: str) -> InvalidSpec:
    message = (
        f"array {text!r}: {why}; write e.g. 0-99, 1,3,5-9, 0-20:2, and %N to cap running tasks"
    )
    return InvalidSpec(message, errors=[{"field": "spec.array", "message": message}])


def parse_array(text: str) -> ArraySpec:
    """`0-99%10`, `1,3,5-9`, `0-20:2` (Slurm's syntax) as an `ArraySpec`, or `InvalidSpec`."""
    raw = str(text).strip()
    body, _, limit = raw.partition("%")
    max_running = None
    if limit:
        if not limit.isdigit() or int(limit) < 1:
            raise _array_error(raw, "the %N limit must be a positive whole number")
        max_running = int(limit)
    indices: set[int] = set()
    for part in filter(None, (p.strip() for p in body.split(","))):
        match = _RANGE.match(part)
        if match is None:
            raise _array_error(raw, f"{part!r} is not N, N-M or N-M:S")
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) is not None else start
        step = int(match.group(3)) if match.group(3) is not None else 1
        if stop < start or step < 1:
            raise _array_error(raw, f"{part!r} is an empty range")
        if stop > MAX_ARRAY_INDEX:
            raise _array_error(raw, f"indices go up to {MAX_ARRAY_INDEX}")
        if (stop - start) // step + 1 + len(indices) > MAX_ARRAY_TASKS:
            raise _array_error(raw, f"an array has at most {MAX_ARRAY_TASKS} tasks")
        indices.update(range(start, stop + 1, step))
    if not indices:
        raise _array_error(raw, "no task index given")
    return ArraySpec(tuple(sorted(indices)), max_running, raw)


def split_task_id(job_id: str) -> tuple[str, int] | None:
    """(array id, index) of a task id `j…_7`, or None for a plain id."""
    match = _TASK_ID.match(job_id)
    return (match.group("array"), int(match.group("task"))) if match else None


def has_placeholders(spec: Any) -> bool:
    """Whether any value of `spec` names `${SAM_ARRAY_TASK_ID}` (or JOB_ID, TASK_COUNT)."""
    return bool(_PLACEHOLDER.search(json.dumps(spec)))


def substitute(spec: Any, values: dict[str, str], *, key: str | None = None) -> Any:
    """`spec` with every `${SAM_ARRAY_*}` in its values replaced. A value that becomes a number
    (`${SAM_ARRAY_TASK_ID}`, `1e-${SAM_ARRAY_TASK_ID}`) becomes that number, except `name`."""
    if isinstance(spec, dict):
        return {k: substitute(v, values, key=k) for k, v in spec.items()}
    if isinstance(spec, list):
        return [substitute(v, values) for v in spec]
    if not isinstance(spec, str) or "${" not in spec:
        return spec
    text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], spec)
    if text == spec or key == "name":
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def task_values(array_id: str, index: int, count: int) -> dict[str, str]:
    """The `${SAM_ARRAY_*}` values of one task (also the sandbox's environment variables)."""
    return {
        "SAM_ARRAY_TASK_ID": str(index),
        "SAM_ARRAY_JOB_ID": array_id,
        "SAM_ARRAY_TASK_COUNT": str(count),
    }


def add_array(
    session: Session,
    *,
    array_id: str,
    head: dict[str, Any],
    array: ArraySpec,
    files: dict[str, str],
) -> None:
    """Store the array's own row (its files once)."""
    session.execute(
        insert(JobArray),
        {
            "id": array_id,
            "tenant_id": head["tenant_id"],
            "user_id": head["user_id"],
            "name": head["name"],
            "indices": array.text,
            "task_count": len(array.indices),
            "max_running": array.max_running,
            "files": files,
            "created_at": head["created_at"],
        },
    )


def insert_tasks(
    session: Session,
    tasks: list[dict[str, Any]],
    events: list[dict[str, Any]],
    *,
    varying: frozenset[str],
) -> None:
    """Every task and its `submitted` event in two driver-level executemany calls, not a
    statement (or a transaction) per task. `varying`: the keys whose values differ between
    tasks; the others are converted for the database once. `spec` comes as JSON text."""
    _bulk_insert(session, cast(Table, Job.__table__), tasks, varying, text_keys={"spec"})
    event_keys = frozenset({"job_id", "reason"})
    _bulk_insert(session, cast(Table, JobEvent.__table__), events, event_keys, text_keys=set())


def _bulk_insert(
    session: Session,
    table: Table,
    rows: list[dict[str, Any]],
    varying: frozenset[str],
    *,
    text_keys: set[str],
) -> None:
    # SQLAlchemy's own executemany converts every value of every row (~50 columns, a JSON
    # encoding each): most of an array's cost. Here constant values are converted once and
    # the statement is compiled once; the driver gets ready rows.
    conn = session.connection()
    dialect = conn.dialect
    keys = list(rows[0])
    compiled = insert(table).compile(dialect=dialect, column_keys=keys)
    convert = {
        k: None if k in text_keys else table.c[k].type._cached_bind_processor(dialect) for k in keys
    }

    def ready(key: str, value: Any) -> Any:
        fn = convert[key]
        return fn(value) if fn is not None and value is not None else value

    constant = {k: ready(k, v) for k, v in rows[0].items()}
    changing = [k for k in keys if k in varying]
    prepared = []
    for row in rows:
        values = dict(constant)
        for key in changing:
            values[key] = ready(key, row[key])
        prepared.append(values)
    if dialect.name == "postgresql":
        # COPY: one stream for every row (executemany is a round trip per row, pipelined).
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        columns = ", ".join(f'"{k}"' for k in keys)
        with cursor.copy(f'COPY "{table.name}" ({columns}) FROM STDIN') as copy:
            for values in prepared:
                copy.write_row([values[k] for k in keys])
        return
    order = compiled.positiontup
    params: Any = [tuple(v[k] for k in order) for v in prepared] if order else prepared
    conn.exec_driver_sql(str(compiled), params)


def array_files(session: Session, array_id: str) -> dict[str, str]:
    """The files uploaded with an array (its tasks store none)."""
    files = session.execute(select(JobArray.files).where(JobArray.id == array_id)).scalar_one()
    return dict(files or {})


def seq_base() -> int:
    """The first `seq` of a batch; tasks take consecutive values after it (submit order)."""
    return time.time_ns()
