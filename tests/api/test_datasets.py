"""Jobs naming data sets: the tenant's own, an operator's shared ones, and one error for the rest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from sam_server.app import create_app
from sam_server.storage.layout import tenant_dataset_dir
from tests.api.helpers import alice_and_eve, spec, submit


@pytest.fixture
def shared_root(tmp_path: Path) -> Path:
    root = tmp_path / "site" / "imagenet"
    root.mkdir(parents=True)
    (root / "x.npy").write_bytes(b"shared")
    return root


@pytest.fixture
def dclient(settings, tmp_path: Path, shared_root: Path) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    """The app with a cluster file offering `imagenet` to tenant acme only."""
    cluster = {
        "wafers": [{"id": "wse-0", "arch": "wse2"}],
        "datasets": [{"name": "imagenet", "path": str(shared_root), "tenants": ["acme"]}],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    settings.cluster = path
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _data(**more: Any) -> dict[str, Any]:
    return {
        "source": "file",
        "file": "data.py",
        "function": "make_batch",
        "task": "regression",
        "input_shape": [8],
        "batch_size": 4,
        **more,
    }


DATA_PY = "def make_batch(step, batch_size):\n    return None\n"
MODEL_PY = (
    "import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self, hidden=16):\n"
    "        super().__init__()\n        self.fc = nn.Linear(8, hidden)\n\n"
    "    def forward(self, x):\n        return self.fc(x)\n"
)
FILES = {"model.py": MODEL_PY, "data.py": DATA_PY}


def _submit(client: TestClient, who: dict[str, str], **data: Any):  # type: ignore[no-untyped-def]
    return submit(client, who, spec(data=_data(**data)), files=FILES)


def test_own_dataset_is_accepted_and_anothers_reads_as_unknown(dclient, settings) -> None:  # type: ignore[no-untyped-def]
    alice, eve = alice_and_eve(dclient)
    own = tenant_dataset_dir(settings.data_dir, "acme", "mnist")
    own.mkdir(parents=True)
    (own / "x.npy").write_bytes(b"x")
    assert _submit(dclient, alice, dataset="mnist").status_code == 201
    theirs = _submit(dclient, eve, dataset="mnist")
    nobody = _submit(dclient, eve, dataset="nosuch")
    assert theirs.status_code == nobody.status_code == 422
    assert theirs.json()["errors"][0]["field"] == "spec.data.dataset"
    # the same answer whether or not another tenant has it: no oracle
    assert theirs.json()["detail"].replace("mnist", "X") == nobody.json()["detail"].replace(
        "nosuch", "X"
    )
    assert "sam data ls" in nobody.json()["detail"]


def test_shared_dataset_only_for_allowed_tenants(dclient) -> None:  # type: ignore[no-untyped-def]
    alice, eve = alice_and_eve(dclient)
    assert _submit(dclient, alice, datasets=["imagenet"]).status_code == 201
    refused = _submit(dclient, eve, datasets=["imagenet"])
    assert refused.status_code == 422 and "no data set 'imagenet'" in refused.json()["detail"]


def test_a_dataset_job_declares_task_and_input_shape(dclient) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(dclient)
    r = submit(dclient, alice, spec(data=_data(dataset="imagenet", input_shape=None)), files=FILES)
    assert r.status_code == 422
    assert "data.task and data.input_shape" in r.json()["detail"]
    synthetic = {"source": "synthetic", "dataset": "imagenet", "task": "regression"}
    r = submit(dclient, alice, spec(data={**synthetic, "input_shape": [8]}), files=FILES)
    assert r.status_code == 422 and "data.source 'file'" in r.json()["detail"]


@pytest.mark.parametrize("bad", ["../acme", "a/b", ".hidden", ""])
def test_dataset_names_are_plain(dclient, bad: str) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(dclient)
    r = _submit(dclient, alice, datasets=[bad])
    assert r.status_code == 422 and "data set names" in r.json()["detail"]


def test_init_from_accepts_an_array_tasks_id(dclient) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(dclient)
    array = submit(dclient, alice, spec(array="0-2"))
    assert array.status_code == 201, array.text
    task_id = f"{array.json()['id']}_1"
    run_options = {"init_from": {"job": task_id}}
    r = submit(dclient, alice, spec(run_options=run_options))
    assert r.status_code == 201, r.text
    missing = submit(dclient, alice, spec(run_options={"init_from": {"job": "jzzz_7"}}))
    assert missing.status_code == 422 and "no job 'jzzz_7' in your tenant" in missing.text


def test_an_array_naming_an_unknown_dataset_is_refused(dclient) -> None:  # type: ignore[no-untyped-def]
    _, eve = alice_and_eve(dclient)
    r = submit(dclient, eve, spec(array="0-3", data=_data(dataset="imagenet")), files=FILES)
    assert r.status_code == 422 and "no data set 'imagenet'" in r.json()["detail"]
    assert dclient.get("/api/v1/jobs", headers=eve).json()["items"] == []
