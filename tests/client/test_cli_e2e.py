"""`sam` against the real server (uvicorn on a free port; the root conftest's `live_server`).

No scheduler runs here, so submitted jobs stay `queued`: enough for the client's whole surface
short of a job finishing (the lead's end-to-end tests run `sam up` for that).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import click.testing
import pytest
import yaml

from client.cli import build_cli
from tests.conftest import ADMIN_TOKEN

MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def forward(self, x):
        return self.layers(x)
"""

JOB = """\
name: e2e-mlp
model:
  file: src/model.py
  class: Net
  kwargs: {hidden: 32}
data: {source: synthetic, task: classification, input_shape: [784], num_classes: 10, batch_size: 8}
run_options: {num_epochs: 1, steps_per_epoch: 3}
resources:
  region: {rows: 8, cols: 8}
"""


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these tests check the client; the server's own tests cover PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


def sam(url: str, token: str, *args: str) -> click.testing.Result:
    runner = click.testing.CliRunner()
    return runner.invoke(
        build_cli(), ["--url", url, "--token", token, *args], catch_exceptions=False
    )


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    project = tmp_path / "project"  # its own folder: the server keeps its files in tmp_path
    project.mkdir()
    (project / "src").mkdir()
    (project / "src" / "model.py").write_text(MODEL)
    path = project / "job.yaml"
    path.write_text(JOB)
    return path


def test_admin_creates_a_tenant_and_user_who_submits_lists_and_cancels(
    live_server, job_file: Path
) -> None:
    url = live_server.url
    created = sam(
        url, ADMIN_TOKEN, "admin", "tenant", "create", "acme", "--max-pes", "100000", "--share", "2"
    )
    assert created.exit_code == 0, created.stderr
    made = sam(url, ADMIN_TOKEN, "admin", "user", "create", "acme", "alice")
    assert made.exit_code == 0, made.stderr
    token = made.stdout.strip()
    assert len(token.splitlines()) == 1 and len(token) >= 16

    who = json.loads(sam(url, token, "whoami", "-o", "json").stdout)
    assert (who["name"], who["tenant"], who["role"]) == ("alice", "acme", "user")

    submitted = sam(url, token, "submit", "--parsable", str(job_file))
    assert submitted.exit_code == 0, submitted.stderr
    job_id = submitted.stdout.strip()

    job = yaml.safe_load(sam(url, token, "status", job_id, "-o", "yaml").stdout)
    assert (str(job["id"]), job["state"], job["tenant"], job["user"]) == (
        job_id,
        "queued",
        "acme",
        "alice",
    )
    listing = sam(url, token, "queue")
    row = next(line for line in listing.stdout.splitlines() if line.startswith(job_id))
    assert row.split()[1:5] == ["acme", "e2e-mlp", "alice", "Q"]
    assert sam(url, token, "explain", job_id).exit_code == 0

    cancelled = sam(url, token, "cancel", job_id)
    assert cancelled.exit_code == 0, cancelled.stderr
    assert (
        json.loads(sam(url, token, "status", job_id, "-o", "json").stdout)["state"] == "cancelled"
    )
    assert sam(url, token, "cancel", job_id).exit_code == 1  # already ended: 409
    assert job_id not in sam(url, token, "queue").stdout
    assert job_id in sam(url, token, "queue", "--all").stdout


def make_user(url: str, tenant: str, name: str) -> str:
    assert sam(url, ADMIN_TOKEN, "admin", "tenant", "create", tenant).exit_code == 0
    made = sam(url, ADMIN_TOKEN, "admin", "user", "create", tenant, name)
    assert made.exit_code == 0, made.stderr
    return made.stdout.strip()


def test_validation_errors_auth_and_tenant_isolation(
    live_server, job_file: Path, tmp_path: Path
) -> None:
    url = live_server.url
    alice, bob = make_user(url, "acme", "alice"), make_user(url, "globex", "bob")
    dry = sam(url, alice, "submit", "--dry-run", str(job_file))
    assert dry.exit_code == 0, dry.stderr
    assert yaml.safe_load(dry.stdout)["name"] == "e2e-mlp"
    assert "8x8" in dry.stderr

    bad = job_file.parent / "bad.yaml"
    bad.write_text(JOB.replace("name: e2e-mlp", "name: e2e-mlp\nnmae: typo"))
    result = sam(url, alice, "submit", str(bad))
    assert result.exit_code == 1 and result.stderr.startswith("error: ")
    assert "nmae" in result.stderr

    job_id = sam(url, alice, "submit", "--parsable", str(job_file)).stdout.strip()
    hidden = sam(url, bob, "status", job_id)
    assert hidden.exit_code == 1 and "error: " in hidden.stderr
    assert job_id not in sam(url, bob, "queue", "--all").stdout
    assert sam(url, bob, "cancel", job_id).exit_code == 1

    assert sam(url, "not-a-token", "whoami").exit_code == 1
    cluster = json.loads(sam(url, alice, "cluster", "-o", "json").stdout)
    assert cluster["wafers"] and {"id", "rows", "cols", "allocations"} <= set(cluster["wafers"][0])
    assert sam(url, alice, "cluster").exit_code == 0


def test_wait_follows_the_live_log_and_exits_1_when_the_job_is_cancelled(
    live_server, job_file: Path
) -> None:
    from client.sdk import SamClient

    url = live_server.url
    token = make_user(url, "acme", "alice")

    def cancel_when_queued() -> None:
        with SamClient(url, token) as api:
            for _ in range(200):
                jobs = list(api.list_jobs(states=["queued"]))
                if jobs:
                    api.cancel_job(str(jobs[0]["id"]))
                    return
                time.sleep(0.05)

    canceller = threading.Thread(target=cancel_when_queued)
    canceller.start()
    result = sam(url, token, "submit", "--wait", "--parsable", str(job_file))
    canceller.join(10)
    job_id = result.stdout.strip()
    assert result.exit_code == 1
    assert f"job {job_id} cancelled" in result.stderr
    followed = sam(url, token, "logs", "-f", job_id)
    assert followed.exit_code == 0 and f"job {job_id} ended: cancelled" in followed.stderr
