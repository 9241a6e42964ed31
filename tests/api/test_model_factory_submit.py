"""A job whose model is a library factory (model.factory): accepted for an allowed package or
the job's own module, refused at submit (422 naming spec.model.factory) for any other package,
and a model given two ways is refused."""

from __future__ import annotations

import pytest

from tests.api.helpers import make_tenant, make_user, spec, submit


@pytest.fixture
def alice(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "acme")
    return make_user(client, "acme", "alice")


def factory(name: str, **model: object) -> dict:
    return spec(model={"factory": name, "kwargs": {"num_classes": 10}, **model})


def test_an_allowed_factory_is_accepted(client, alice):
    r = submit(client, alice, factory("torchvision.models.googlenet"), files={})
    assert r.status_code == 201, r.text


def test_a_factory_of_the_jobs_own_module_is_accepted(client, alice):
    files = {"nets/__init__.py": "", "nets/build.py": "def net(): ..."}
    r = submit(client, alice, factory("nets.build.net"), files=files)
    assert r.status_code == 201, r.text


def test_a_factory_of_another_package_is_refused(client, alice):
    r = submit(client, alice, factory("subprocess.run"), files={})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["errors"][0]["field"] == "spec.model.factory"
    assert "'subprocess' is not a package models may be built from" in body["detail"]
    assert "torchvision" in body["detail"]


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ({"factory": "torchvision.models.resnet18", "builtin": "mlp"}, "not builtin and factory"),
        ({"builtin": "mlp", "config": {"a": 1}}, "model.config is for model.factory"),
        ({"factory": "resnet18"}, "String should match pattern"),
        ({"factory": "torchvision._C.x"}, "String should match pattern"),
    ],
)
def test_a_model_given_badly_is_refused(client, alice, model, says):
    r = submit(client, alice, spec(model=model), files={})
    assert r.status_code == 422, r.text
    assert says in r.json()["detail"]
