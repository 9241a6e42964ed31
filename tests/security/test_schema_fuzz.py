"""Property (issue 29): no request a client can form answers 5xx or hangs. Schemathesis reads the
API's own OpenAPI document and, for every operation, generates requests from it: valid ones,
ones that break each declared constraint (types, bounds, required fields, formats), and the job
spec's every field; each is sent to a real server (uvicorn on a loopback port, SQLite and
PostgreSQL) as a tenant's user and as the cluster admin. An answer >= 500, or none within
REQUEST_TIMEOUT_S, fails the test with the request that caused it.

tests/security/test_odd_input_property.py throws hand-picked odd values (1e999, NUL, deep
nesting, huge ids) at the same routes; this one follows the schema, so it reaches each route's
deeper code with bodies the route's own validation lets through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.api.helpers import ADMIN, make_tenant, make_user, submit
from tests.conftest import ADMIN_TOKEN, LiveServer, create_pg_database, drop_pg_database

# Streams that stay open by design (live event feeds; `?follow=true` of logs and metrics) are
# not request/answer routes: their own tests end them.
STREAMS = r"/events$"
REQUEST_TIMEOUT_S = 20
# Requests per operation and database (~40 operations, 2 databases): CI's share, under a minute.
# SAM_FUZZ_EXAMPLES=500 for a deeper hunt.
EXAMPLES = int(os.environ.get("SAM_FUZZ_EXAMPLES", "30"))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A real server with a tenant, its user and one job of theirs."""
    import httpx

    from sam_server.config import Settings
    from sam_server.db.session import upgrade_database

    tmp: Path = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{tmp / 'sam.db'}"
    if request.param == "postgres":
        url = create_pg_database()
        upgrade_database(url)
    config = Settings(data_dir=tmp / "data", database_url=url, admin_token=ADMIN_TOKEN)
    with LiveServer(config) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        job_id = submit(client, alice).json()["id"]
        openapi = client.get("/openapi.json").json()
        yield {
            "url": server.url,
            "alice": alice,
            "job_id": job_id,
            "openapi": openapi,
            "session": requests.Session(),
        }
    if request.param == "postgres":
        drop_pg_database(url)


def _operations(openapi: dict[str, Any]) -> list[Any]:
    schema = schemathesis.openapi.from_dict(openapi).exclude(path_regex=STREAMS)
    return [result.ok() for result in schema.get_all_operations()]


def _job_spec_operation(openapi: dict[str, Any]) -> Any:
    """POST /api/v1/jobs as if its `spec` were typed: the API takes the spec as an open object
    (so its errors name the job.yaml field, not a JSON path), so the schema above only makes
    specs that fail at once. This document types it with the JobSpec model, so specs reach
    every field's own check, the array syntax, the time limit parser and the quota check."""
    from sam_server.schemas.job_spec import JobSpec

    spec = JobSpec.model_json_schema(ref_template="#/components/schemas/{model}")
    components = spec.pop("$defs")
    components["JobSpec"] = spec
    # The cross-field rules JSON Schema does not carry, so most specs get past them: a built-in
    # model (a file model needs a model.py, which test_odd_input_property sends), and a region
    # or a PE count, not both.
    model = components["ModelSpec"]
    model["properties"] = {
        "builtin": {"enum": ["mlp", "cnn", "gpt"]},
        "kwargs": model["properties"]["kwargs"],
    }
    model["required"] = ["builtin"]
    resources = components["Resources"]
    resources["not"] = {"required": ["region", "pes"]}
    body = {
        "type": "object",
        "properties": {
            "spec": {"$ref": "#/components/schemas/JobSpec"},
            "files": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["spec"],
        "additionalProperties": False,
    }
    document = {
        "openapi": openapi["openapi"],
        "info": openapi["info"],
        "paths": {
            "/api/v1/jobs": {
                "post": {
                    "parameters": [
                        {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": body}},
                    },
                    "responses": {"201": {"description": "submitted"}},
                }
            }
        },
        "components": {"schemas": components},
    }
    (result,) = schemathesis.openapi.from_dict(document).get_all_operations()
    return result.ok()


def _cases(operation: Any) -> st.SearchStrategy[Any]:
    """Requests that fit the operation's schema, and ones that break it."""
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    return st.one_of(*(operation.as_strategy(generation_mode=mode) for mode in modes))


def _send(live: dict[str, Any], case: Any, real_job: bool, admin: bool) -> None:
    if real_job:  # reach past the 404 with the job and tenant that exist
        known = {"job_id": live["job_id"], "name": "acme"}
        for name in set(case.path_parameters or {}) & set(known):
            case.path_parameters[name] = known[name]
    if isinstance(case.query, dict) and "follow" in case.query:
        case.query["follow"] = "false"  # a stream stays open by design
    headers = dict(ADMIN if admin else live["alice"])
    try:
        response = case.call(
            base_url=live["url"],
            session=live["session"],
            headers=headers,
            timeout=REQUEST_TIMEOUT_S,
        )
    except requests.Timeout:
        pytest.fail(f"no answer in {REQUEST_TIMEOUT_S} s: {case.as_curl_command(headers)}")
    assert response.status_code < 500, (
        f"{response.status_code}: {case.as_curl_command(headers)}\n{response.text[:2000]}"
    )


def test_no_schema_generated_request_answers_5xx_or_hangs(live: dict[str, Any]) -> None:
    """Every operation of the schema in turn, EXAMPLES requests each (shrunk on a failure)."""
    operations = _operations(live["openapi"])
    assert len(operations) >= 30, [op.label for op in operations]
    job_specs = _job_spec_operation(live["openapi"])
    for operation in [*operations, job_specs]:
        spec = operation is job_specs  # a tenant's submit, and the job spec property's share

        @settings(
            max_examples=EXAMPLES * (6 if spec else 1),
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate, Phase.shrink],
            suppress_health_check=list(HealthCheck),
        )
        @given(
            case=_cases(operation),
            real_job=st.booleans(),
            admin=st.just(False) if spec else st.booleans(),
        )
        def probe(case: Any, real_job: bool, admin: bool) -> None:
            _send(live, case, real_job, admin)

        probe()
