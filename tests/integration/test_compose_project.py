"""Issue 28's "done means" on docker-compose.yml's processes (PostgreSQL, Redis, the API on two
uvicorn workers, the scheduler, two compile workers and two wafer workers, each its own
process): the project with a helper package, a 68 MB .npy memory-mapped by data_utils.py and
labels read from the working directory, sent by `sam submit`, trains with eager PyTorch's
losses (rtol 1e-3); the unchanged resubmit sends no file bytes and runs too."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.e2e.test_project_e2e import _eager, _project, _sam
from tests.integration.compose import ComposeProcesses
from tests.integration.test_compose_cluster import _tenant, _wait_all, cluster  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_the_68_mb_npy_project_trains_on_the_compose_processes(
    cluster: ComposeProcesses,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    who = _tenant(cluster, "proj")
    token = who["Authorization"].removeprefix("Bearer ")
    job_file = _project(tmp_path / "project")
    first = _sam(cluster, token, "submit", "--parsable", str(job_file))
    assert first.exit_code == 0, first.output
    assert "(sent 65." in first.stderr  # the 68 MB .npy went, in chunks
    again = _sam(cluster, token, "submit", "--parsable", str(job_file))
    assert again.exit_code == 0 and "project:" not in again.stderr, again.output  # nothing sent
    ids = [first.stdout.strip(), again.stdout.strip()]
    jobs = _wait_all(cluster, ids, timeout=900)
    assert all(j["state"] == "succeeded" for j in jobs.values()), {
        j: (v["state"], v.get("error")) for j, v in jobs.items()
    }
    monkeypatch.chdir(job_file.parent)  # data_utils reads data/y.npy from the working directory
    eager = _eager(job_file.parent, job_file)
    for job_id in ids:
        steps = httpx.get(
            f"{cluster.url}/api/v1/jobs/{job_id}/metrics", headers=who, timeout=30
        ).json()["steps"]
        np.testing.assert_allclose([s["loss"] for s in steps], eager, rtol=1e-3)
