"""`GET /jobs`: a page of jobs, newest first, read column by column (sam_server.schemas.listing).

A listing of 10,000 jobs has to answer in tens of milliseconds, so nothing here loads an ORM
object or decodes a JSON column: one SELECT of the columns the answer shows (tenant and user
names joined in), a keyset cursor on (seq, id), and rows turned straight into JSON values.

An array's waiting tasks are ONE row by default (`arrays=collapse`), the way Slurm keeps a
pending array as one record: a GROUP BY counts them per array, state and reason, the gaps-and-
islands of their indices give Slurm's `ID_[0-9999]`, and the lowest task lends the row its name,
priority and the rest. The row sorts by its newest task's seq; its cursor key is (that seq, the
array's id), which no task id equals.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from operator import itemgetter
from typing import Any

from sqlalchemy import Select, String, and_, case, func, or_, select, type_coerce
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobArray, Tenant, User
from sam_server.db.types import as_utc
from sam_server.errors import InvalidSpec
from sam_server.schemas.jobs import VIEW_COLUMNS, view_of
from sam_server.schemas.listing import SLIM_COLUMNS, ArraysMode, View
from sam_server.schemas.numbers import INT64_MAX
from sam_server.services.auth import Principal
from sam_server.states import WAITING

_IN_CHUNK = 500  # ids per IN list (SQLite caps bound parameters)
HELD_REASONS = {"user": "JobHeldUser", "admin": "JobHeldAdmin"}
_TIMES = ("created_at", "started_at", "finished_at")


@dataclass(frozen=True)
class Listing:
    """What a `GET /jobs` asks for."""

    states: Sequence[str] = ()
    user: str | None = None
    tenant: str | None = None
    jobs: Sequence[str] = ()  # only these jobs, or these arrays' tasks
    arrays: ArraysMode = "collapse"
    limit: int = 50
    cursor: str | None = None


@dataclass
class _Group:
    """One array's collapsed row, counted from the GROUP BY."""

    array_id: str
    seq: int = 0
    tasks: int = 0
    first_index: int | None = None
    created_at: Any = None
    states: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)


def encode_cursor(seq: int, key: str) -> str:
    """The cursor of the page after a row whose sort key is (seq, key)."""
    return base64.urlsafe_b64encode(f"{seq}:{key}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[int, str]:
    """(seq, key) of a cursor this server issued; a 422 naming `cursor` otherwise."""
    try:
        seq, key = base64.urlsafe_b64decode(cursor[:256].encode()).decode().split(":", 1)
        number = int(seq)
        if not 0 <= number <= INT64_MAX or "\x00" in key:  # never a seq of this server
            raise ValueError(seq)
        return number, key
    except (ValueError, UnicodeError) as exc:
        raise InvalidSpec(
            "the cursor is not one this server issued; start without it",
            errors=[{"field": "cursor", "message": "not a cursor of this server"}],
        ) from exc


def list_page(
    session: Session, principal: Principal, want: Listing, view: View
) -> dict[str, object]:
    """The answer of `GET /jobs`: `{items, next_cursor}` (full) or `{columns, rows, next_cursor}`
    (slim), `want.limit` rows at most."""
    after = decode_cursor(want.cursor) if want.cursor else None
    waiting = [s for s in (want.states or WAITING) if s in WAITING]
    collapse = want.arrays == "collapse" and bool(waiting)
    sqlite = session.get_bind().dialect.name == "sqlite"
    plain = _plain_rows(session, principal, want, after, collapse, view, sqlite)
    groups = _groups(session, principal, want, waiting, after) if collapse else []
    # Both lists are newest first; merged, the page is the first `limit` of them.
    sort_key = _sort_key(view)
    keyed: list[tuple[tuple[int, str], Any]] = [(sort_key(r), r) for r in plain]
    keyed += [((g.seq, g.array_id), g) for g in groups]
    keyed.sort(key=lambda pair: pair[0], reverse=True)
    page = keyed[: want.limit]
    next_cursor = encode_cursor(*page[-1][0]) if len(keyed) > want.limit else None
    chosen = [g for _, g in page if isinstance(g, _Group)]
    lowest = _lowest_tasks(session, chosen, view, sqlite) if chosen else {}
    names = _Names(session, view, [row for _, row in page if not isinstance(row, _Group)])
    names.add(session, list(lowest.values()))
    runs = _index_runs(session, chosen, waiting) if chosen else {}
    build = _slim_row if view == "slim" else _full_item
    out: list[Any] = []
    for _, item in page:
        if not isinstance(item, _Group):
            out.append(build(item, names))
        elif item.array_id in lowest:  # else its lowest task moved on between the two reads
            changes = _summary_changes(item, runs.get(item.array_id, []))
            out.append(build(lowest[item.array_id], names, changes))
    if view == "slim":
        return {"columns": list(SLIM_COLUMNS), "rows": out, "next_cursor": next_cursor}
    return {"items": out, "next_cursor": next_cursor}


# -- the query's shape -------------------------------------------------------------------------

# A slim row's values as selected: SLIM_COLUMNS' order, with the ids of the tenant and user in
# their names' places, the region's five columns in its place, and seq in the summary's.
_SLIM_SELECTED = (
    "id",
    "name",
    "tenant_id",
    "user_id",
    "state",
    "priority",
    "mode",
    "created_at",
    "started_at",
    "finished_at",
    "attempts",
    "reason",
    "hold",
    "wafer_id",
    "region_row",
    "region_col",
    "region_rows",
    "region_cols",
    "progress_step",
    "total_steps",
    "progress_loss",
    "error_kind",
    "array_job_id",
    "array_task_id",
    "seq",
)
_REGION_AT = _SLIM_SELECTED.index("wafer_id")
_TIMES_AT = tuple(SLIM_COLUMNS.index(name) for name in _TIMES)


def _column_names(view: View) -> tuple[str, ...]:
    """The names of the columns a row of `view` is selected with, in their order."""
    if view == "full":
        return tuple(dict.fromkeys([*VIEW_COLUMNS, "tenant_id", "user_id", "seq"]))
    return _SLIM_SELECTED


@cache
def _columns(view: View, sqlite: bool) -> tuple[Any, ...]:
    """The columns a row of `view` is built from (built once: composing these expressions
    cost an array's one-line listing more than its queries). A slim row's times on SQLite are
    turned into RFC 3339 text by the database from their stored text (`2026-12-05
    18:50:31.123456`, UTC): parsing 30,000 of them into datetimes only to write them out again
    was a third of a 10,000-row listing."""
    cols: list[Any] = [getattr(Job, name) for name in _column_names(view)]
    if sqlite and view == "slim":
        cols = [_iso_sql(c).label(c.key) if c.key in _TIMES else c for c in cols]
    return tuple(cols)


@cache
def _sort_key(view: View) -> Callable[[Any], tuple[int, str]]:
    """(seq, id) of a selected row, by position (a Row's attribute lookup costs more)."""
    names = _column_names(view)
    return itemgetter(names.index("seq"), names.index("id"))


@cache
def _id_getters(view: View) -> tuple[Callable[[Any], int], Callable[[Any], int]]:
    """The tenant id and the user id of a selected row, by position."""
    names = _column_names(view)
    return itemgetter(names.index("tenant_id")), itemgetter(names.index("user_id"))


def _iso_sql(column: Any) -> Any:
    """SQLite's stored time as `GET /jobs/{id}` writes it: `2026-12-05T18:50:31.123456Z`
    (without `.000000`, as Python's isoformat); NULL stays NULL."""
    text = type_coerce(column, String)
    whole = case((func.substr(text, 20) == ".000000", func.substr(text, 1, 19)), else_=text)
    return type_coerce(func.replace(whole, " ", "T"), String) + "Z"


def _rows(session: Session, query: Any) -> list[Any]:
    """The rows of a column query, through Core (the ORM's result machinery is not needed for
    plain columns and costs more than the query)."""
    return list(session.connection().execute(query).all())


def _select(principal: Principal, want: Listing, cols: Sequence[Any]) -> Select[Any]:
    """SELECT `cols` from the jobs the caller may see that match the filters (no join: names
    are looked up once per page, `_Names`)."""
    query = select(*cols)
    if not principal.is_admin:
        query = query.where(Job.tenant_id == principal.tenant_id)
    elif want.tenant:
        tenant = select(Tenant.id).where(Tenant.name == want.tenant).scalar_subquery()
        query = query.where(Job.tenant_id == tenant)
    if want.user:
        query = query.where(Job.user_id.in_(select(User.id).where(User.name == want.user)))
    if want.states:
        query = query.where(Job.state.in_(list(want.states)))
    if want.jobs:
        ids = list(want.jobs)
        query = query.where(or_(Job.id.in_(ids), Job.array_job_id.in_(ids)))
    return query


def _plain_rows(
    session: Session,
    principal: Principal,
    want: Listing,
    after: tuple[int, str] | None,
    collapse: bool,
    view: View,
    sqlite: bool,
) -> list[Any]:
    """The page's rows of single jobs (with `collapse`, an array's waiting tasks are left to
    the groups), newest first, one more than the page when there are more."""
    query = _select(principal, want, _columns(view, sqlite))
    if collapse:
        query = query.where(or_(Job.array_job_id.is_(None), Job.state.not_in(WAITING)))
    if after is not None:
        seq, key = after
        query = query.where(or_(Job.seq < seq, and_(Job.seq == seq, Job.id < key)))
    query = query.order_by(Job.seq.desc(), Job.id.desc()).limit(want.limit + 1)
    return _rows(session, query)


def _groups(
    session: Session,
    principal: Principal,
    want: Listing,
    waiting: list[str],
    after: tuple[int, str] | None,
) -> list[_Group]:
    """The collapsed rows of arrays with waiting tasks among the filters, newest first (up to one
    more than the page), counted per state and reason in one GROUP BY (a held task's reason is its hold)."""
    cols = [
        Job.array_job_id,
        Job.state,
        Job.reason,
        Job.hold,
        func.count(),
        func.max(Job.seq),
        func.min(Job.array_task_id),
        func.min(Job.created_at),
    ]
    query = _select(principal, want, cols).where(
        Job.array_job_id.is_not(None), Job.state.in_(waiting)
    )
    query = query.group_by(Job.array_job_id, Job.state, Job.reason, Job.hold)
    groups: dict[str, _Group] = {}
    for array_id, state, reason, hold, count, seq, first, created in _rows(session, query):
        group = groups.get(array_id) or groups.setdefault(array_id, _Group(array_id))
        group.tasks += count
        group.seq = max(group.seq, seq)
        if group.first_index is None or first < group.first_index:
            group.first_index = first
        created = as_utc(created)
        if group.created_at is None or created < group.created_at:
            group.created_at = created
        group.states[state] = group.states.get(state, 0) + count
        why = HELD_REASONS.get(hold) or str(reason)  # held: its hold, whatever the last cycle said
        group.reasons[why] = group.reasons.get(why, 0) + count
    found = sorted(groups.values(), key=lambda g: (g.seq, g.array_id), reverse=True)
    if after is not None:
        found = [g for g in found if (g.seq, g.array_id) < after]
    return found[: want.limit + 1]


def _lowest_tasks(
    session: Session, groups: list[_Group], view: View, sqlite: bool
) -> dict[str, object]:
    """Each group's lowest waiting task's row (it lends the collapsed row its values)."""
    firsts = [f"{g.array_id}_{g.first_index}" for g in groups]
    lowest: dict[str, Any] = {}
    cols = _columns(view, sqlite)
    for start in range(0, len(firsts), _IN_CHUNK):
        query = select(*cols).where(Job.id.in_(firsts[start : start + _IN_CHUNK]))
        lowest.update((row.array_job_id, row) for row in _rows(session, query))
    return lowest


def _summary_changes(group: _Group, runs: list[tuple[str, str]]) -> dict[str, object]:
    """What a collapsed row changes of its lowest task's values: Slurm's id, the most common
    state and reason, the earliest submit time, and the `summary`."""
    indices = ",".join(a if a == b else f"{a}-{b}" for a, b in runs)
    reason = _most(group.reasons)
    return {
        "id": f"{group.array_id}_[{indices}]",
        "state": _most(group.states),
        "reason": None if reason == "None" else reason,
        "created_at": _iso(group.created_at),
        "array_task_id": None,
        "summary": {
            "indices": indices,
            "tasks": group.tasks,
            "states": group.states,
            "reasons": group.reasons,
        },
    }


def _index_runs(
    session: Session, groups: list[_Group], waiting: list[str]
) -> dict[str, list[tuple[str, str]]]:
    """The runs of consecutive indices of each array's waiting tasks (gaps and islands: an
    index minus its rank is the same along a run), as text pairs, lowest first. An array all
    of whose tasks wait is written as its submit wrote it (`0-9999`, `0-20:2`), unread."""
    whole = _whole_arrays(session, groups)
    runs: dict[str, list[tuple[str, str]]] = {a: [(text, text)] for a, text in whole.items()}
    rest = [g.array_id for g in groups if g.array_id not in whole]
    rank = func.row_number().over(partition_by=Job.array_job_id, order_by=Job.array_task_id)
    for start in range(0, len(rest), _IN_CHUNK):
        inner = select(
            Job.array_job_id.label("array_id"),
            Job.array_task_id.label("index"),
            (Job.array_task_id - rank).label("island"),
        ).where(Job.array_job_id.in_(rest[start : start + _IN_CHUNK]), Job.state.in_(waiting))
        sub = inner.subquery()
        query = select(sub.c.array_id, func.min(sub.c.index), func.max(sub.c.index))
        query = query.group_by(sub.c.array_id, sub.c.island)
        query = query.order_by(sub.c.array_id, func.min(sub.c.index))
        for array_id, low, high in _rows(session, query):
            runs.setdefault(array_id, []).append((str(low), str(high)))
    return runs


def _whole_arrays(session: Session, groups: list[_Group]) -> dict[str, str]:
    """{array id: its indices as submitted, without `%N`} for the groups that hold every task
    of their array."""
    counts = {g.array_id: g.tasks for g in groups}
    query = select(JobArray.id, JobArray.indices, JobArray.task_count)
    whole = {}
    ids = list(counts)
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = query.where(JobArray.id.in_(ids[start : start + _IN_CHUNK]))
        for array_id, indices, task_count in _rows(session, chunk):
            if counts[array_id] == task_count:
                whole[array_id] = indices.partition("%")[0].replace(" ", "")
    return whole


def _most(counts: dict[str, int]) -> str:
    """The key with the largest count (the first such in insertion order on a tie)."""
    return max(counts, key=lambda k: counts[k])


# -- rows to JSON ------------------------------------------------------------------------------


class _Names:
    """The names of the tenants and users of a page's rows, looked up once for the page."""

    def __init__(self, session: Session, view: View, rows: list[Any]) -> None:
        self.tenants: dict[int, str] = {}
        self.users: dict[int, str] = {}
        self.tenant_of, self.user_of = _id_getters(view)
        self.add(session, rows)

    def add(self, session: Session, rows: list[Any]) -> None:
        for table, known, ids in (
            (Tenant, self.tenants, set(map(self.tenant_of, rows))),
            (User, self.users, set(map(self.user_of, rows))),
        ):
            missing = list(ids - known.keys())
            for start in range(0, len(missing), _IN_CHUNK):
                chunk = missing[start : start + _IN_CHUNK]
                query = select(table.id, table.name).where(table.id.in_(chunk))
                known.update(_rows(session, query))


def _iso(value: Any) -> str | None:
    """RFC 3339 UTC text, as `GET /jobs/{id}` writes it (text already so is kept)."""
    if value is None or isinstance(value, str):
        return value
    return str(as_utc(value).isoformat()).replace("+00:00", "Z")  # type: ignore[union-attr]


def _slim_row(row: Any, names: _Names, changes: Mapping[str, object] | None = None) -> list[Any]:
    """A slim row (SLIM_COLUMNS' order) of a selected row, with `changes` by column name."""
    values = list(row)
    values[2] = names.tenants.get(values[2])
    values[3] = names.users.get(values[3])
    at = _REGION_AT
    wafer = values[at]
    region = None
    if wafer is not None:
        region = dict(zip(_REGION_KEYS, values[at : at + 5], strict=True))
    values[at : at + 5] = [region]
    values[-1] = None  # seq's place: the summary
    for i in _TIMES_AT:
        value = values[i]
        if value is not None and not isinstance(value, str):  # PostgreSQL's datetimes
            values[i] = _iso(value)
    if changes:
        for key, value in changes.items():
            values[_SLIM_INDEX[key]] = value
    return values


_REGION_KEYS = ("wafer", "row", "col", "rows", "cols")
_SLIM_INDEX = {name: i for i, name in enumerate(SLIM_COLUMNS)}


def _full_item(
    row: Any, names: _Names, changes: Mapping[str, object] | None = None
) -> dict[str, object]:
    """A job object (`JobListItem`) of a selected row, with `changes` by field name."""
    mapping = row._mapping
    get: Callable[[str], Any] = mapping.__getitem__
    tenant, user = names.tenants.get(row.tenant_id, ""), names.users.get(row.user_id, "")
    view = view_of(get, tenant, user, summary=True)
    view["summary"] = None
    if changes:
        view.update(changes)
    return view
