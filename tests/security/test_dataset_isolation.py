"""Data sets on a real `sam up` cluster: a job of another tenant that walks the whole file system
finds no file of a tenant's data sets, nor of a shared data set it is not allowed; the owner's
job (the positive control) finds both at /datasets/NAME, and its compile sandbox sees neither."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from sam_server.storage.layout import tenant_dataset_dir
from tests.e2e.local_cluster import running_cluster

pytestmark = pytest.mark.slow
ADMIN = {"Authorization": "Bearer sam-admin-dsiso"}
MARK = uuid.uuid4().hex
MODEL = """import os
import torch.nn as nn

if os.path.exists("/datasets"):
    raise RuntimeError("the compile sandbox sees /datasets")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)
"""
WALKER = """import os
import numpy as np

MARK = "@MARK@"[::-1]  # reversed here, so that this file does not hold the mark itself
SKIP = ("/proc", "/sys", "/dev")


def _found():
    found = []
    for top, dirs, names in os.walk("/", onerror=lambda e: None):
        if top.startswith(SKIP):
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(top, name)
            if MARK in name:
                found.append(path)
                continue
            try:
                if os.path.isfile(path) and os.path.getsize(path) < 4096:
                    with open(path, "rb") as handle:
                        if MARK.encode() in handle.read():
                            found.append(path)
            except OSError:
                pass
    return found


def make_batch(step, batch_size):
    if step == 0:
        found = _found()
        if found:
            raise RuntimeError("FOUND " + " ".join(sorted(found)))
    return np.zeros((batch_size, 4), np.float32), np.zeros((batch_size, 1), np.float32)
""".replace("@MARK@", MARK[::-1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("dataset-isolation")
    site = root / "site-data"
    site.mkdir()
    (site / f"shared-{MARK}.txt").write_text(MARK)
    cluster_yaml = (
        "wafers:\n  - {id: tiny, arch: wse2, rows: 64, cols: 64}\n"
        f"datasets:\n  - {{name: site, path: '{site}', tenants: [lab]}}\n"
    )
    with running_cluster(root, cluster_yaml, admin_token="sam-admin-dsiso") as c:
        own = tenant_dataset_dir(c.settings.data_dir, "lab", "secret")
        own.mkdir(parents=True)
        (own / f"own-{MARK}.txt").write_text(MARK)
        (own / "plain.bin").write_text(f"content {MARK}")
        yield c


def _user(c, tenant: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{tenant}/users", json={"name": "u"}, headers=ADMIN)
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _submit(c, who: dict[str, str], **data: Any) -> httpx.Response:  # type: ignore[no-untyped-def]
    spec = {
        "name": "walker",
        "model": {"file": "model.py", "class": "Net"},
        "data": {
            "source": "file",
            "file": "data.py",
            "function": "make_batch",
            "task": "regression",
            "input_shape": [4],
            "batch_size": 4,
            **data,
        },
        "train": {"loss": "mse"},
        "run_options": {"steps_per_epoch": 2, "checkpoint_enabled": False},
        "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
    }
    body = {"spec": spec, "files": {"model.py": MODEL, "data.py": WALKER}}
    return httpx.post(f"{c.url}/api/v1/jobs", json=body, headers=who)


def _wait(c, who: dict[str, str], job_id: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        c.watch()
        job = httpx.get(f"{c.url}/api/v1/jobs/{job_id}", headers=who).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end")


def test_another_tenants_walk_finds_no_dataset_file(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lab, rival = _user(cluster, "lab"), _user(cluster, "rival")
    # the owner's walk finds both data sets where the docs say (and the compile saw neither)
    r = _submit(cluster, lab, dataset="secret", datasets=["site"])
    assert r.status_code == 201, r.text
    owner = _wait(cluster, lab, r.json()["id"])
    message = (owner.get("error") or {}).get("message", "")
    assert owner["state"] == "failed" and "FOUND" in message, owner
    assert f"/datasets/secret/own-{MARK}.txt" in message
    assert f"/datasets/site/shared-{MARK}.txt" in message

    # another tenant cannot name them, and its job finds none of their files
    for name in ("secret", "site"):
        refused = _submit(cluster, rival, dataset=name)
        assert refused.status_code == 422 and f"no data set {name!r}" in refused.text
    r = _submit(cluster, rival)
    assert r.status_code == 201, r.text
    walked = _wait(cluster, rival, r.json()["id"])
    assert walked["state"] == "succeeded", walked.get("error")
