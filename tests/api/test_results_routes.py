"""The results routes on SQLite and PostgreSQL: what a job has, its weights and checkpoints as
the wafer worker writes them, only for the job's tenant; init_from only names own jobs."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from sam_server.services import results
from sam_worker.job_outputs import save_weights
from tests.api.helpers import make_tenant, make_user, spec, submit
from wse_sim.runtime import save_checkpoint


@pytest.fixture
def users(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "lab")
    make_tenant(client, "rivals")
    return make_user(client, "lab", "alice"), make_user(client, "rivals", "bob")


def test_artifacts_weights_and_checkpoints_for_the_owner_only(client, users, settings):
    alice, bob = users
    body = spec("ckpt", run_options={"checkpoint_dir": "runs/a"})
    job = submit(client, alice, body).json()
    listing = client.get(f"/api/v1/jobs/{job['id']}/artifacts", headers=alice).json()
    assert listing["weights"] is None and listing["checkpoints"] == []
    r = client.get(f"/api/v1/jobs/{job['id']}/weights", headers=alice)
    assert r.status_code == 404 and "written when a training job succeeds" in r.json()["detail"]

    # what a wafer worker writes: a checkpoint in the tenant's checkpoint_dir, final weights
    where = settings.data_dir.resolve() / "tenants" / "lab" / "runs" / "a" / job["id"]
    state = {"fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "_steps_done": np.int64(4)}
    save_checkpoint(where, 4, state)
    save_weights(
        {"fc.weight": state["fc.weight"]}, results.weights_path(settings.data_dir, job["id"])
    )

    listing = client.get(f"/api/v1/jobs/{job['id']}/artifacts", headers=alice).json()
    assert [c["step"] for c in listing["checkpoints"]] == [4]
    got = client.get(listing["checkpoints"][0]["url"], headers=alice)
    with np.load(io.BytesIO(got.content), allow_pickle=False) as data:
        np.testing.assert_array_equal(data["fc.weight"], state["fc.weight"])
    weights = torch.load(
        io.BytesIO(client.get(listing["weights"]["url"], headers=alice).content), weights_only=True
    )
    assert torch.equal(weights["fc.weight"], torch.from_numpy(state["fc.weight"]))
    missing = client.get(f"/api/v1/jobs/{job['id']}/checkpoints/5", headers=alice)
    assert missing.status_code == 404 and "it has [4]" in missing.json()["detail"]
    for path in ("artifacts", "weights", "checkpoints/4"):
        assert client.get(f"/api/v1/jobs/{job['id']}/{path}", headers=bob).status_code == 404


def test_init_from_must_name_a_job_of_the_same_tenant(client, users):
    alice, bob = users
    source = submit(client, alice, spec("source")).json()
    follow = spec("follow", run_options={"init_from": {"job": source["id"], "step": 2}})
    assert submit(client, alice, follow).status_code == 201
    r = submit(client, bob, follow)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "spec.run_options.init_from.job"
