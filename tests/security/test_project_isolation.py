"""Projects on a real `sam up` cluster: a job sees only its own project. Another tenant's job
that walks the whole file system, in its compile sandbox and in its data sandbox, finds no file
of a tenant's project (nor of the chunk store behind it); the owner's job (the positive control)
finds its own project's files at /job/src."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import click.testing
import httpx
import pytest

from client.cli import build_cli
from tests.e2e.local_cluster import running_cluster

pytestmark = pytest.mark.slow
ADMIN = {"Authorization": "Bearer sam-admin-projiso"}
MARK = uuid.uuid4().hex
FIND = """import os

MARK = "@MARK@"[::-1]  # reversed here, so that this file does not hold the mark itself
SKIP = ("/proc", "/sys", "/dev")


def found():
    hits = []
    for top, dirs, names in os.walk("/", onerror=lambda e: None):
        if top.startswith(SKIP):
            dirs[:] = []
            continue
        for name in names:
            path = os.path.join(top, name)
            if MARK in name:
                hits.append(path)
                continue
            try:
                if os.path.isfile(path) and os.path.getsize(path) < 4096:
                    with open(path, "rb") as handle:
                        if MARK.encode() in handle.read():
                            hits.append(path)
            except OSError:
                pass
    return sorted(hits)
""".replace("@MARK@", MARK[::-1])
MODEL = """import torch.nn as nn

from walk import found

# the compile sandbox: nothing of another project (the job's own is at /job/src)
elsewhere = [p for p in found() if not p.startswith("/job/src/")]
if elsewhere:
    raise RuntimeError("COMPILE FOUND " + " ".join(elsewhere))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)
"""
DATA = """import numpy as np

from walk import found


def make_batch(step, batch_size):
    hits = found() if step == 0 else []
    if hits:
        raise RuntimeError("FOUND " + " ".join(hits))
    return np.zeros((batch_size, 4), np.float32), np.zeros((batch_size, 1), np.float32)
"""
JOB = """name: walker
model: {file: model.py, class: Net}
data: {source: file, file: data.py, function: make_batch, task: regression, input_shape: [4],
       batch_size: 4}
train: {loss: mse}
run_options: {steps_per_epoch: 2, checkpoint_enabled: false}
resources: {region: {rows: 4, cols: 4}, time_limit: 5m}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("project-isolation")
    cluster_yaml = "wafers:\n  - {id: tiny, arch: wse2, rows: 64, cols: 64}\n"
    with running_cluster(root, cluster_yaml, admin_token="sam-admin-projiso") as c:
        yield c


def _user(c, tenant: str) -> str:  # type: ignore[no-untyped-def]
    httpx.post(f"{c.url}/api/v1/tenants", json={"name": tenant}, headers=ADMIN).raise_for_status()
    r = httpx.post(f"{c.url}/api/v1/tenants/{tenant}/users", json={"name": "u"}, headers=ADMIN)
    r.raise_for_status()
    return str(r.json()["token"])


def _project(folder: Path, secret: bool) -> Path:
    (folder / "configs").mkdir(parents=True)
    for name, text in {
        "walk.py": FIND,
        "model.py": MODEL,
        "data.py": DATA,
        "job.yaml": JOB,
    }.items():
        (folder / name).write_text(text)
    if secret:
        (folder / f"secret-{MARK}.txt").write_text("weights")
        (folder / "configs" / "keys.yaml").write_text(f"key: {MARK}\n")
    return folder / "job.yaml"


def _submit_and_wait(c, token: str, job_file: Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    result = click.testing.CliRunner().invoke(
        build_cli(),
        ["--url", c.url, "--token", token, "submit", str(job_file), "--parsable"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        c.watch()
        job = httpx.get(
            f"{c.url}/api/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
        ).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end")


def test_another_tenants_walk_finds_no_file_of_a_project(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lab, rival = _user(cluster, "lab"), _user(cluster, "rival")
    owner = _submit_and_wait(cluster, lab, _project(tmp_path / "lab", secret=True))
    message = (owner.get("error") or {}).get("message", "")
    # the owner's data sandbox finds its own project where the docs say, and nothing else
    assert owner["state"] == "failed" and "FOUND" in message and "COMPILE" not in message, owner
    assert f"/job/src/secret-{MARK}.txt" in message and "/job/src/configs/keys.yaml" in message
    assert message.count(MARK) == 1  # only the file named with it: no copy elsewhere
    # another tenant's job, with its own project, finds none of them anywhere
    walked = _submit_and_wait(cluster, rival, _project(tmp_path / "rival", secret=False))
    assert walked["state"] == "succeeded", walked.get("error")
