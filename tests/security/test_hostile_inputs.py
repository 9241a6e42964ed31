"""Odd input from issue 29: each was a 500 (OverflowError, RecursionError, a database DataError);
each is now a 422 that names the field, and nothing is written. On SQLite and PostgreSQL."""

from __future__ import annotations

import base64

import pytest

from tests.api.helpers import ADMIN, MODEL_PY, make_tenant, make_user, spec, submit


@pytest.fixture
def alice(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "acme")
    return make_user(client, "acme", "alice")


def _refused(r, field: str) -> str:  # type: ignore[no-untyped-def]
    """The answer is a problem+json 422 naming `field`; its detail."""
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert field in [e["field"] for e in body["errors"]], body
    return str(body["detail"])


def _no_job(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/v1/jobs", headers=ADMIN).json()["items"] == []


def _raw(client, headers, text: str):  # type: ignore[no-untyped-def]
    return client.post(
        "/api/v1/jobs", content=text, headers={**headers, "content-type": "application/json"}
    )


@pytest.mark.parametrize("limit", [1e30, 10**30, "99999999999999999999d"])
def test_a_time_limit_of_1e30_is_refused(client, alice, limit):
    resources = {"region": {"rows": 4, "cols": 4}, "time_limit": limit}
    detail = _refused(submit(client, alice, spec(resources=resources)), "spec.resources.time_limit")
    assert "366 days" in detail
    _no_job(client)


def test_steps_of_1e30_and_a_total_of_2_to_the_64_are_refused(client, alice):
    r = submit(client, alice, spec(run_options={"steps_per_epoch": 10**30}))
    _refused(r, "spec.run_options.steps_per_epoch")
    r = submit(client, alice, spec(run_options={"num_epochs": 2**32, "steps_per_epoch": 2**32}))
    _refused(r, "spec.run_options.num_epochs")
    # each factor in range, the product (10^10 steps) not
    r = submit(client, alice, spec(run_options={"num_epochs": 100_000, "steps_per_epoch": 100_000}))
    assert "10,000,000,000 steps" in _refused(r, "spec.run_options")
    _no_job(client)


@pytest.mark.parametrize("seq", [10**23, 2**63, -(2**70)])
def test_a_huge_cursor_is_refused(client, alice, seq):
    cursor = base64.urlsafe_b64encode(f"{seq}:jabc".encode()).decode()
    r = client.get("/api/v1/jobs", params={"cursor": cursor}, headers=alice)
    assert "cursor" in _refused(r, "cursor")


def test_deeply_nested_yaml_is_refused(client, alice):
    for deep in (
        "name: x\nmodel: " + "[" * 5000 + "]" * 5000,
        "a: " + "{b: " * 3000 + "1" + "}" * 3000,
    ):
        r = client.post("/api/v1/jobs", json={"spec_yaml": deep}, headers=alice)
        assert "nested deeper than" in _refused(r, "spec_yaml")
    _no_job(client)


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_non_finite_json_numbers_are_refused(client, alice, number):
    text = (
        '{"spec": {"name": "x", "model": {"builtin": "mlp"}, '
        f'"train": {{"optimizer": {{"lr": {number}}}}}}}}}'
    )
    assert "not a finite number" in _refused(_raw(client, alice, text), "spec.train.optimizer.lr")
    text = f'{{"spec": {{"name": "x", "model": {{"builtin": "mlp"}}, "resources": {{"time_limit": {number}}}}}}}'
    _refused(_raw(client, alice, text), "spec.resources.time_limit")
    _no_job(client)


def test_non_finite_yaml_numbers_are_refused(client, alice):
    text = "name: x\nmodel:\n  builtin: mlp\n  kwargs:\n    hidden: .inf\n"
    r = client.post("/api/v1/jobs", json={"spec_yaml": text}, headers=alice)
    assert "spec.model.kwargs.hidden" in _refused(r, "spec_yaml")
    _no_job(client)


def test_deeply_nested_json_is_refused(client, alice):
    text = '{"spec": {"name": "x", "model": {"builtin": "mlp", "kwargs": {"a": '
    text += "[" * 100_000 + "]" * 100_000 + "}}}}"
    assert "nested deeper than" in _refused(_raw(client, alice, text), "body")
    _no_job(client)


@pytest.mark.parametrize("token_id", [10**23, 2**63, 2**31])
def test_a_token_id_of_10_to_the_23_is_refused(client, alice, token_id):
    for verb in ("revoke", "rotate"):
        r = client.post(f"/api/v1/tokens/{token_id}/{verb}", headers=alice)
        _refused(r, "path.token_id")


def test_nul_characters_are_refused_not_a_database_error(client, alice):
    r = submit(client, alice, spec(name="a\x00b"))
    _refused(r, "spec.name")
    r = client.post(
        "/api/v1/jobs",
        json={"spec": spec(), "files": {"model.py": MODEL_PY + "\x00"}},
        headers=alice,
    )
    _refused(r, "files.model.py")
    _refused(client.get("/api/v1/jobs", params={"user": "a\x00"}, headers=alice), "query.user")
    _refused(client.get("/api/v1/jobs/j%00x", headers=alice), "path")
    _no_job(client)


def test_a_huge_last_event_id_is_refused(client, alice):
    job_id = submit(client, alice).json()["id"]
    headers = {**alice, "Last-Event-ID": "9" * 30, "Accept": "text/event-stream"}
    r = client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)
    assert r.status_code == 400, r.text
    assert "Last-Event-ID" in r.json()["detail"]
