"""Property: no input makes a 5xx. Hypothesis throws odd numbers, text, JSON and YAML at every
route of the OpenAPI schema (path and query parameters, bodies, a job spec with one field
replaced), as the cluster admin, a tenant's user and nobody; every answer is below 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.helpers import ADMIN, MODEL_PY, make_tenant, make_user, spec, submit
from tests.conftest import ADMIN_TOKEN, create_pg_database, drop_pg_database

# Streams that stay open by design (a live event feed) are not request/answer routes.
STREAMS = ("/events",)

EDGES = st.sampled_from(
    [10**23, 2**63, 2**64, -(2**63) - 1, 2**31, -1, 0, 1e30, -1e30, 1e308, 5e-324, 10**400]
)
ODD_NUMBERS = st.one_of(
    EDGES, EDGES, EDGES, st.integers(), st.floats(allow_nan=False, allow_infinity=False)
)
ODD_STRINGS = st.sampled_from(
    [
        "",
        "\x00",
        "a\x00b",
        "\u202ename\u202c",
        "9" * 400,
        "1e999",
        "Infinity",
        "NaN",
        "-1",
        "../../etc/passwd",
        "0001-01-01T00:00:00",
        "9999-12-31T23:59:59-14:00",
        "jabc_99999999999999999999",
        "x" * 5000,
    ]
)
ODD_TEXT = st.one_of(ODD_STRINGS, ODD_STRINGS, st.text(max_size=40))
ODD_SCALAR = st.one_of(ODD_NUMBERS, ODD_NUMBERS, ODD_TEXT, st.booleans(), st.none())
ODD_JSON = st.recursive(
    ODD_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
RAW_BODIES = st.sampled_from(
    [
        '{"spec": Infinity}',
        '{"spec": {"name": NaN}}',
        '{"a": 1e999}',
        '{"a": -1e999}',
        "[" * 50_000 + "]" * 50_000,
        '{"a": ' + "9" * 5000 + "}",
        '"\\u0000"',
        '{"spec_yaml": "a: .inf"}',
        "{",
        "\xff\xfe",
        "null",
    ]
)
ODD_YAML = st.sampled_from(
    [
        "a: " + "[" * 3000 + "]" * 3000,
        "name: x\nmodel: {builtin: mlp, kwargs: {h: .nan}}\n",
        "name: x\nmodel: {builtin: mlp}\nresources: {time_limit: 1e999}\n",
        "name: !!python/object/apply:os.system [id]\n",
        'name: "a\\0b"\nmodel: {builtin: mlp}\n',
        "- " * 2000 + "x",
        ":",
    ]
)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _leaves(child, (*path, key))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


VALID_SPEC = spec(
    run_options={"num_epochs": 1, "steps_per_epoch": 5},
    train={"seed": 1, "optimizer": {"name": "sgd", "lr": 0.1}},
)
SPEC_PATHS = list(_leaves(VALID_SPEC))


@st.composite
def job_bodies(draw: st.DrawFn) -> dict[str, Any] | str:
    """A submit body: the valid spec with one field replaced, odd YAML, or odd raw JSON."""
    kind = draw(st.sampled_from(["spec", "yaml", "raw", "json"]))
    if kind == "spec":
        path = draw(st.sampled_from(SPEC_PATHS))
        body_spec = _replaced(VALID_SPEC, path, draw(ODD_JSON))
        if draw(st.booleans()):
            return {"spec_yaml": yaml.safe_dump(body_spec), "files": {"model.py": MODEL_PY}}
        return {"spec": body_spec, "files": {"model.py": MODEL_PY}}
    if kind == "yaml":
        return {"spec_yaml": draw(ODD_YAML)}
    if kind == "raw":
        return draw(RAW_BODIES)
    return draw(ODD_JSON)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The real app (SQLite, then PostgreSQL: a NUL or an int8 overflow is a DataError there)
    with a tenant, its user and one job; the routes of its schema."""
    from fastapi.testclient import TestClient

    from sam_server.app import create_app
    from sam_server.config import Settings
    from sam_server.db.session import upgrade_database

    tmp: Path = tmp_path_factory.mktemp("odd")
    url = f"sqlite:///{tmp / 'sam.db'}"
    if request.param == "postgres":
        url = create_pg_database()
        upgrade_database(url)
    settings_ = Settings(data_dir=tmp / "data", database_url=url, admin_token=ADMIN_TOKEN)
    app = create_app(settings_)
    with TestClient(app, raise_server_exceptions=False) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        job_id = submit(client, alice).json()["id"]
        operations = [
            (method.upper(), path, op.get("parameters", []), "requestBody" in op)
            for path, ops in app.openapi()["paths"].items()
            for method, op in ops.items()
            if not path.endswith(STREAMS)
        ]
        yield {"client": client, "alice": alice, "job_id": job_id, "operations": operations}
    if request.param == "postgres":
        drop_pg_database(url)


SETTINGS = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _send(world: dict[str, Any], method: str, url: str, body: Any, **kwargs: Any) -> None:
    if body is not None:
        text = body if isinstance(body, str) else json.dumps(body)
        kwargs["content"] = text.encode("utf-8", "surrogateescape")
        kwargs["headers"] = {**kwargs["headers"], "content-type": "application/json"}
    r = world["client"].request(method, url, **kwargs)
    assert r.status_code < 500, (method, url, kwargs, r.text)


@SETTINGS
@given(data=st.data())
def test_no_route_answers_5xx_to_odd_input(world: dict[str, Any], data: st.DataObject) -> None:
    """Every route: odd path and query parameters, odd bodies, as admin, a user and nobody."""
    method, path, parameters, has_body = data.draw(st.sampled_from(world["operations"]))
    who = data.draw(st.sampled_from(["admin", "alice", "alice", "nobody"]))
    headers = {"admin": ADMIN, "alice": world["alice"], "nobody": {}}[who]
    url, query = path, {}
    for param in parameters:
        if param["in"] == "path":
            value = data.draw(st.one_of(st.just(world["job_id"]), ODD_NUMBERS, ODD_TEXT))
            url = url.replace("{" + param["name"] + "}", quote(str(value), safe="") or "x")
        elif param["in"] == "query":
            value = data.draw(st.one_of(st.none(), ODD_NUMBERS, ODD_TEXT))
            if value is not None:
                query[param["name"]] = str(value)
    body = data.draw(st.one_of(ODD_JSON, RAW_BODIES)) if has_body else None
    _send(world, method, url, body, params=query, headers=headers)


@SETTINGS
@given(body=job_bodies())
def test_no_job_spec_answers_5xx(world: dict[str, Any], body: dict[str, Any] | str) -> None:
    """A submit (and a dry run) of the valid spec with one field odd, of odd YAML, of odd JSON."""
    _send(world, "POST", "/api/v1/jobs", body, headers=world["alice"])
