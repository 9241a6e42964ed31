"""Job arrays (Slurm's `--array`): the index syntax, `${SAM_ARRAY_*}` substitution in a spec's
values, and the one-request bulk insert of every task.

A task is an ordinary job whose id is `<array id>_<index>` (`sam cancel j…_7` names one task,
`sam cancel j…` the whole array). The array's uploaded files live once in `job_arrays`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast, overload

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from sam_domain.compile import compile_inputs
from sam_domain.json_value import JsonValue
from sam_server.db.models import Job, JobArray, JobEvent
from sam_server.errors import InvalidSpec

PlaceholderTree = dict[str | int, "PlaceholderTree | None"]
"""Where a spec's placeholders are: {key or list index: subtree, or None at a value holding one}."""

# Slurm's default MaxArraySize is 1001; SAM's sweeps are cheap rows, so it allows more (the
# setting max_array_tasks; MAX_ARRAY_TASKS is its default).
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


def parse_array(text: str, *, max_tasks: int = MAX_ARRAY_TASKS) -> ArraySpec:
    """`0-99%10`, `1,3,5-9`, `0-20:2` (Slurm's syntax) as an `ArraySpec`, or `InvalidSpec`
    (also for more than `max_tasks` tasks)."""
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
        if (stop - start) // step + 1 + len(indices) > max_tasks:
            raise _array_error(
                raw, f"an array has at most {max_tasks} tasks here (max_array_tasks); split it"
            )
        indices.update(range(start, stop + 1, step))
    if not indices:
        raise _array_error(raw, "no task index given")
    return ArraySpec(tuple(sorted(indices)), max_running, raw)


def split_task_id(job_id: str) -> tuple[str, int] | None:
    """(array id, index) of a task id `j…_7`, or None for a plain id."""
    match = _TASK_ID.match(job_id)
    return (match.group("array"), int(match.group("task"))) if match else None


def has_placeholders(spec: JsonValue) -> bool:
    """Whether any value of `spec` names `${SAM_ARRAY_TASK_ID}` (or JOB_ID, TASK_COUNT)."""
    return bool(_PLACEHOLDER.search(json.dumps(spec)))


@overload
def substitute(
    spec: dict[str, JsonValue], values: dict[str, str], *, key: str | None = None
) -> dict[str, JsonValue]: ...
@overload
def substitute(spec: JsonValue, values: dict[str, str], *, key: str | None = None) -> JsonValue: ...
def substitute(spec: JsonValue, values: dict[str, str], *, key: str | None = None) -> JsonValue:
    """`spec` with every `${SAM_ARRAY_*}` in its values replaced. A value that becomes a number
    (`${SAM_ARRAY_TASK_ID}`, `1e-${SAM_ARRAY_TASK_ID}`) becomes that number, except `name`."""
    if isinstance(spec, dict):
        return {k: substitute(v, values, key=k) for k, v in spec.items()}
    if isinstance(spec, list):
        return [substitute(v, values) for v in spec]
    return _substitute_value(spec, values, key)


def placeholder_tree(spec: JsonValue) -> PlaceholderTree | None:
    """Where `spec`'s placeholders are: {key or list index: subtree, or None at a value that
    holds one}; None when there is none. `substitute_tree` then copies only those branches."""
    if isinstance(spec, dict | list):
        items: Iterable[tuple[str | int, JsonValue]]
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        tree: PlaceholderTree = {}
        for k, v in items:
            if isinstance(v, dict | list):
                sub = placeholder_tree(v)
                if sub is not None:
                    tree[k] = sub
            elif isinstance(v, str) and _PLACEHOLDER.search(v):
                tree[k] = None
        return tree or None
    return None


def substitute_tree(spec: JsonValue, tree: PlaceholderTree, values: dict[str, str]) -> JsonValue:
    """What `substitute(spec, values)` gives, for the `placeholder_tree(spec)` of `spec`: the
    branches without placeholders are shared with `spec`, not copied (an array's 10,000 tasks
    each need their own values, not their own copy of the whole spec)."""
    if isinstance(spec, dict):
        copy = dict(spec)
        for k, sub in tree.items():
            key = str(k)
            copy[key] = _substituted(spec[key], sub, values, key)
        return copy
    if isinstance(spec, list):
        items = list(spec)
        for k, sub in tree.items():
            items[int(k)] = _substituted(spec[int(k)], sub, values, None)
        return items
    return spec


def _substituted(
    value: JsonValue, sub: PlaceholderTree | None, values: dict[str, str], key: str | None
) -> JsonValue:
    """One branch of `substitute_tree`: a value that holds a placeholder, or a subtree."""
    return (
        _substitute_value(value, values, key)
        if sub is None
        else substitute_tree(value, sub, values)
    )


def _substitute_value(spec: JsonValue, values: dict[str, str], key: str | None) -> JsonValue:
    if not isinstance(spec, str) or "${" not in spec:
        return spec
    text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], spec)
    if text == spec or key == "name":
        return text
    for kind in (int, float):
        try:
            number: int | float = kind(text)
        except ValueError:
            continue
        return number
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
    head: Mapping[str, object],
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
    constant: Mapping[str, object],
    varying: Sequence[str],
    rows: Sequence[tuple[object, ...]],
) -> None:
    """Tasks of an array in one bulk statement: `rows` hold each task's `varying` column
    values (its spec as JSON text), `constant` the values all tasks share."""
    table = cast(Table, Job.__table__)
    insert_rows(session, table, constant, varying, rows, text_keys=frozenset({"spec"}))


def insert_events(
    session: Session, constant: Mapping[str, object], rows: list[tuple[str, str]]
) -> None:
    """Each task's `submitted` event: `rows` are (job_id, reason)."""
    insert_rows(session, cast(Table, JobEvent.__table__), constant, ("job_id", "reason"), rows)


def placeholders_reach_compile(spec: Mapping[str, JsonValue]) -> bool:
    """Whether a `${SAM_ARRAY_*}` sits in a value that feeds the compile key (its inputs, or what
    sets the region's shape: the resources but their time limit, `pes`, `region`): if not,
    every task shares the first task's compiled program."""
    feeding: dict[str, JsonValue] = {**compile_inputs(spec), "pes": spec.get("pes")}
    feeding["region"] = spec.get("region")
    resources = spec.get("resources")
    if isinstance(resources, dict):
        feeding["resources"] = {k: v for k, v in resources.items() if k != "time_limit"}
    else:
        feeding["resources"] = resources
    return has_placeholders(feeding)


def insert_rows(
    session: Session,
    table: Table,
    constant: Mapping[str, object],
    varying: Sequence[str],
    rows: Sequence[tuple[object, ...]],
    *,
    text_keys: frozenset[str] = frozenset(),
) -> None:
    """Insert one row per tuple of `rows` (the values of the `varying` columns, in that order),
    every row also taking the `constant` values, in one bulk statement.

    SQLAlchemy's own executemany converts every value of every row (~50 columns, a JSON
    encoding each): most of an array's cost. Here the constant values are converted once and
    written once: on PostgreSQL into the COPY text of every line, elsewhere as literals in the
    INSERT, so each row carries only its own few values. `text_keys`: varying columns given as
    ready text (a spec's JSON)."""
    conn = session.connection()
    dialect = conn.dialect

    def processor(key: str) -> Any:
        return table.c[key].type._cached_bind_processor(dialect)

    fixed = {k: _ready(processor(k), v) for k, v in constant.items()}
    convert = [None if k in text_keys else processor(k) for k in varying]
    if any(fn is not None for fn in convert):
        rows = [tuple(_ready(fn, v) for fn, v in zip(convert, row, strict=True)) for row in rows]
    preparer = dialect.identifier_preparer
    if dialect.name == "postgresql" and _copy_rows(conn, table, fixed, varying, rows):
        return
    literal: dict[str, str] = {}
    if dialect.paramstyle == "qmark":  # SQLite; with %-parameters a literal's % would need care
        literal = {k: text for k, v in fixed.items() if (text := _sql_literal(v)) is not None}
    params = [k for k in fixed if k not in literal]
    columns = [*varying, *params, *literal]
    values = ["?"] * (len(varying) + len(params)) + list(literal.values())
    if dialect.paramstyle != "qmark":
        values = [f"%({i})s" for i in range(len(values))]
    sql = (
        f"INSERT INTO {preparer.format_table(table)} "
        f"({', '.join(preparer.quote(c) for c in columns)}) VALUES ({', '.join(values)})"
    )
    extra = tuple(fixed[k] for k in params)
    batch: Sequence[tuple[object, ...]] | list[dict[str, object]]
    batch = [row + extra for row in rows] if extra else rows
    if dialect.paramstyle != "qmark":
        batch = [{str(i): v for i, v in enumerate(row)} for row in batch]
    conn.exec_driver_sql(sql, batch)


def _ready(fn: Callable[[object], object] | None, value: object) -> object:
    return fn(value) if fn is not None and value is not None else value


def _copy_rows(
    conn: Any,
    table: Table,
    fixed: dict[str, object],
    varying: Sequence[str],
    rows: Sequence[tuple[object, ...]],
) -> bool:
    """COPY the rows as one text stream (PostgreSQL); False (nothing sent) when a value has no
    COPY text form here, for the caller's INSERT instead."""
    try:
        tail = "".join("\t" + _copy_text(v) for v in fixed.values()) + "\n"
        lines = ["\t".join([_copy_text(v) for v in row]) + tail for row in rows]
    except TypeError:
        return False
    columns = ", ".join(f'"{k}"' for k in [*varying, *fixed])
    cursor = conn.connection.dbapi_connection.cursor()
    with cursor.copy(f'COPY "{table.name}" ({columns}) FROM STDIN') as copy:
        for start in range(0, len(lines), 2000):
            copy.write("".join(lines[start : start + 2000]))
    return True


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: object) -> str:
    """A value in PostgreSQL's COPY text format; TypeError for a type not handled here."""
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    kind = type(value)
    if kind is str:  # exactly str (a subclass goes the generic way below)
        text = str(value)  # the same object
        if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
            return text.translate(_COPY_ESCAPES)
        return text
    if kind is int:
        return str(value)
    if kind is float and isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.isoformat()
    from psycopg.types.json import Json, Jsonb  # what SQLAlchemy's JSON columns bind on psycopg

    if isinstance(value, Json | Jsonb):
        dumped = (value.dumps or json.dumps)(value.obj)
        return (dumped.decode() if isinstance(dumped, bytes) else dumped).translate(_COPY_ESCAPES)
    raise TypeError(f"no COPY text for {kind.__name__}")


def _sql_literal(value: object) -> str | None:
    """`value` as an SQL literal, or None to send it as a parameter instead."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "1" if value else "0"
    if type(value) is int:
        return str(value)
    if type(value) is str and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    return None


def array_files(session: Session, array_id: str) -> dict[str, str]:
    """The files uploaded with an array (its tasks store none)."""
    files = session.execute(select(JobArray.files).where(JobArray.id == array_id)).scalar_one()
    return dict(files or {})


def seq_base() -> int:
    """The first `seq` of a batch; tasks take consecutive values after it (submit order)."""
    return time.time_ns()
