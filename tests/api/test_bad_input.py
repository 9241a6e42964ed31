"""Bad input: the status docs/contract.md section 2 names, a message naming the problem, nothing written."""

from __future__ import annotations

import pytest

from tests.api.helpers import ADMIN, MODEL_PY, make_tenant, make_user, spec, submit


@pytest.fixture
def alice(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "acme")
    return make_user(client, "acme", "alice")


def _nothing_written(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/v1/jobs", headers=ADMIN).json()["items"] == []


def _problem(r, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert {"type", "title", "status", "detail"} <= body.keys() and body["status"] == status
    return body


def test_malformed_yaml_names_the_line(client, alice):
    text = "name: x\nmodel:\n  builtin: mlp\n  kwargs: {hidden: 4\n"
    r = client.post("/api/v1/jobs", json={"spec_yaml": text}, headers=alice)
    body = _problem(r, 422)
    assert "line" in body["detail"]
    _nothing_written(client)


def test_yaml_anchor_bomb_is_refused(client, alice):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    r = client.post("/api/v1/jobs", json={"spec_yaml": bomb}, headers=alice)
    body = _problem(r, 422)
    assert "anchors and aliases" in body["detail"]
    _nothing_written(client)


def test_body_over_one_mib_is_413(client, alice):
    big = {"model.py": MODEL_PY + "#" * (1024 * 1024 + 10)}
    r = client.post("/api/v1/jobs", json={"spec": spec(), "files": big}, headers=alice)
    body = _problem(r, 413)
    assert "bytes" in body["detail"]
    _nothing_written(client)


def test_spec_naming_a_file_not_uploaded(client, alice):
    r = submit(client, alice, files={})
    body = _problem(r, 422)
    assert body["errors"][0]["field"] == "spec.model.file"
    assert "model.py" in body["detail"]
    _nothing_written(client)


def test_class_missing_from_model_file(client, alice):
    r = submit(client, alice, files={"model.py": "class Other: pass\n"})
    body = _problem(r, 422)
    assert body["errors"][0]["field"] == "spec.model.class"
    _nothing_written(client)


def test_python_syntax_error_is_reported_with_line(client, alice):
    r = submit(client, alice, files={"model.py": "class Net(:\n  pass\n"})
    body = _problem(r, 422)
    assert "line 1" in body["detail"]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"data": {"batch_size": "big"}}, "spec.data.batch_size"),
        ({"resources": {"region": {"rows": 0, "cols": 4}}}, "spec.resources.region.rows"),
        ({"resources": {"region": {"rows": 4, "cols": -2}}}, "spec.resources.region.cols"),
        ({"resources": {"pes": 0}}, "spec.resources.pes"),
        ({"priority": "asap"}, "spec.priority"),
        ({"run_options": {"steps_per_epoch": 0}}, "spec.run_options.steps_per_epoch"),
        ({"resources": {"time_limit": "soon"}}, "spec.resources.time_limit"),
        ({"modle": {"builtin": "mlp"}}, "spec.modle"),
        ({"train": {"optimizer": {"name": "adam", "momentum": 0.9}}}, "spec.train.optimizer"),
    ],
)
def test_wrong_types_and_unknown_keys_name_their_field(client, alice, override, field):
    r = submit(client, alice, spec(**override))
    body = _problem(r, 422)
    fields = [e["field"] for e in body["errors"]]
    assert any(f.startswith(field) for f in fields), fields
    _nothing_written(client)


def test_missing_name_and_non_mapping_spec(client, alice):
    s = spec()
    del s["name"]
    body = _problem(submit(client, alice, s), 422)
    assert "spec.name" in [e["field"] for e in body["errors"]]
    r = client.post("/api/v1/jobs", json={"spec": [1, 2]}, headers=alice)
    _problem(r, 422)


def test_unknown_route_and_bad_json_are_problems(client, alice):
    _problem(client.get("/api/v1/nope", headers=alice), 404)
    r = client.post(
        "/api/v1/jobs", content=b"{not json", headers=alice | {"content-type": "application/json"}
    )
    _problem(r, 422)


@pytest.mark.parametrize("bad", ["../etc/passwd", "/etc/passwd", "a/../../b", "a\\b"])
def test_file_names_must_be_plain_relative_paths(client, alice, bad):
    files = {"model.py": MODEL_PY, bad: "x"}
    body = _problem(submit(client, alice, files=files), 422)
    assert "relative paths" in body["detail"]
    _nothing_written(client)


def test_a_file_name_with_a_nul_character_is_refused(client, alice):
    body = _problem(submit(client, alice, files={"model.py": MODEL_PY, "x\x00y": "x"}), 422)
    assert body["errors"] == [
        {"field": "files", "message": "the key 'x\\x00y' contains a NUL character"}
    ]
    _nothing_written(client)


def test_files_in_subfolders_are_accepted(client, alice):
    s = spec()
    s["model"]["file"] = "src/model.py"
    r = submit(client, alice, s, files={"src/model.py": MODEL_PY})
    assert r.status_code == 201, r.text
