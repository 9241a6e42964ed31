"""A project's requirements.txt is checked at submit against the workers' packages."""

from __future__ import annotations

from importlib import metadata

from sam_server.services.requirements import unmet_requirements
from tests.api.helpers import MODEL_PY, alice_and_eve, submit

NUMPY = metadata.version("numpy")


def test_packages_the_workers_lack_are_refused_naming_the_lines(client) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    text = f"numpy=={NUMPY}\n# a comment\nnot-a-real-pkg-sam>=1\nnumpy<1.0  # too old\n"
    r = submit(client, alice, files={"model.py": MODEL_PY, "requirements.txt": text})
    assert r.status_code == 422
    body = r.json()
    assert body["errors"][0]["field"] == "files.requirements.txt"
    assert "line 3 'not-a-real-pkg-sam>=1': not-a-real-pkg-sam is not installed" in body["detail"]
    assert f"line 4 'numpy<1.0': the workers have numpy {NUMPY}" in body["detail"]
    assert "line 1" not in body["detail"]  # what is installed is not named
    jobs = client.get("/api/v1/jobs", headers=alice).json()
    assert jobs["items"] == []  # nothing written


def test_installed_requirements_pass(client) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    text = f"numpy>={NUMPY}\nPyYAML\ntorch ; python_version >= '3'\n"
    r = submit(client, alice, files={"model.py": MODEL_PY, "requirements.txt": text})
    assert r.status_code == 201, r.text


def test_options_urls_and_garbage_are_named() -> None:
    unmet = unmet_requirements(
        "-e .\npkg @ https://example.com/p.whl\n!!!\nfoo ; python_version < '3'\n"
    )
    assert [u.split(":")[0] for u in unmet] == [
        "line 1 '-e .'",
        "line 2 'pkg @ https",
        "line 3 '!!!'",
    ]
    assert "pip options are not supported" in unmet[0]
    assert "URL requirements" in unmet[1] and "not a requirement" in unmet[2]
