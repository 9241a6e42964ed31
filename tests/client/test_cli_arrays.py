"""`sam submit --array/--dependency/--hold`, `sam queue` (collapsed and `--array`), `sam hold`,
`release`, `update` and `cancel` of an array, against the real server (uvicorn, SQLite; the
scheduler's side is tests/controller/test_arrays_deps.py, on both databases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.test_cli_e2e import MODEL, sam
from tests.conftest import ADMIN_TOKEN

JOB = """\
name: sweep-${SAM_ARRAY_TASK_ID}
model: {file: model.py, class: Net, kwargs: {hidden: 32}}
data: {source: synthetic, task: classification, input_shape: [784], num_classes: 10, batch_size: 8}
train: {optimizer: {name: sgd, lr: "1e-${SAM_ARRAY_TASK_ID}"}}
resources: {region: {rows: 8, cols: 8}}
"""


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.fixture
def user(live_server) -> str:  # type: ignore[no-untyped-def]
    assert sam(live_server.url, ADMIN_TOKEN, "admin", "tenant", "create", "lab").exit_code == 0
    made = sam(live_server.url, ADMIN_TOKEN, "admin", "user", "create", "lab", "alice")
    return made.stdout.strip()


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    project = tmp_path / "project"  # its own folder: the server keeps its files in tmp_path
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    path = project / "job.yaml"
    path.write_text(JOB)
    return path


def _jobs(url: str, token: str) -> list[dict]:  # type: ignore[type-arg]
    return json.loads(sam(url, token, "queue", "--array", "-o", "json").stdout)


def test_array_submit_substitutes_collapses_and_controls(live_server, user, job_file) -> None:  # type: ignore[no-untyped-def]
    url = live_server.url
    out = sam(url, user, "submit", str(job_file), "--array", "1-3,5,7-9%2")
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("Submitted array job ") and "(7 tasks)" in out.stdout
    array_id = out.stdout.split()[3]
    jobs = {j["array_task_id"]: j for j in _jobs(url, user)}
    assert sorted(jobs) == [1, 2, 3, 5, 7, 8, 9]
    assert jobs[3]["name"] == "sweep-3" and jobs[3]["id"] == f"{array_id}_3"
    listing = sam(url, user, "queue").stdout
    assert f"{array_id}_[1-3,5,7-9]" in listing and f"{array_id}_3 " not in listing
    expanded = sam(url, user, "queue", "--array").stdout
    assert all(f"{array_id}_{i} " in expanded for i in (1, 2, 3, 5, 7, 8, 9))

    assert sam(url, user, "cancel", f"{array_id}_5").stdout.strip() == f"job {array_id}_5 cancelled"
    held = sam(url, user, "hold", array_id)
    assert held.exit_code == 0 and held.stdout.startswith(f"array {array_id}: 6 tasks held")
    assert {j["hold"] for j in _jobs(url, user)} == {"user"}
    assert sam(url, user, "release", f"{array_id}_1").stdout.strip() == f"job {array_id}_1 released"
    renamed = sam(url, user, "update", array_id, "--priority", "low", "--name", "swept")
    assert renamed.exit_code == 0, renamed.stderr
    assert {(j["priority"], j["name"]) for j in _jobs(url, user)} == {("low", "swept")}
    raised = sam(url, user, "update", f"{array_id}_1", "--priority", "high")
    assert raised.exit_code == 1 and "needs a cluster admin" in raised.stderr
    cancelled = sam(url, user, "cancel", array_id)
    assert cancelled.exit_code == 0 and "6 tasks cancelled" in cancelled.stdout
    assert _jobs(url, user) == []


def test_dependency_and_hold_flags_and_bad_arrays(live_server, user, job_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = live_server.url
    plain = job_file.parent / "plain.yaml"
    plain.write_text(JOB.replace("${SAM_ARRAY_TASK_ID}", "1"))
    first = sam(url, user, "submit", "--parsable", str(plain)).stdout.strip()
    second = sam(url, user, "submit", "--parsable", "-d", f"afterok:{first}", "--hold", str(plain))
    assert second.exit_code == 0, second.stderr
    job = json.loads(sam(url, user, "status", second.stdout.strip(), "-o", "json").stdout)
    assert (job["dependency"], job["hold"]) == (f"afterok:{first}", "user")
    for bad, message in (
        ("0-x", "is not N, N-M or N-M:S"),
        ("5-1", "empty range"),
        ("0-3%0", "%N"),
    ):
        out = sam(url, user, "submit", str(job_file), "--array", bad)
        assert out.exit_code == 1 and message in out.stderr, out.stderr
    unknown = sam(url, user, "submit", str(plain), "--dependency", "afterok:jnope")
    assert unknown.exit_code == 1 and "no job jnope" in unknown.stderr
    assert sam(url, user, "submit", str(job_file), "--array", "0-3", "--wait").exit_code == 2
