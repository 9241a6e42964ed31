"""A Runner script on a login node (docs/runner.md): `python train.py` with SAM_URL/SAM_TOKEN and
`sam run train.py` submit the script's folder as a job whose entry is the script, against the
real server; the job shows in `sam queue` and `sam status` with its script named. (It trains on
the wafer in tests/e2e/test_runner_e2e.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from tests.client.test_cli_acct import people, sam  # noqa: F401 (fixture)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed_runner"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sam.db'}"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "seed_runner"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("SAM_RUNNER", None)
    return env


def _job(url: str, token: str, job_id: str, db: str) -> dict:  # type: ignore[type-arg]
    got = httpx.get(f"{url}/api/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    got.raise_for_status()
    with session_scope(db) as session:  # the spec as the workers receive it
        spec = session.get(Job, job_id).spec  # type: ignore[union-attr]
    return {**got.json(), "spec": spec}


@pytest.mark.slow
def test_python_train_py_submits_the_folder_with_the_script_as_entry(
    live_server,
    settings,
    people,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = _copy(tmp_path)
    (folder / "notes.txt").write_text("sent with the project\n")
    env = _env(tmp_path, SAM_URL=live_server.url, SAM_TOKEN=people["alice"], SAM_RUN_WAIT="0")
    done = subprocess.run(
        [sys.executable, "train.py", "--lr", "0.01"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("Submitted job ") and "sam logs -f" in line, done.stdout
    assert "(train.py, 2 epochs of 16 steps)" in line
    job_id = line.split()[2]
    job = _job(live_server.url, people["alice"], job_id, settings.resolved_database_url)
    spec = job["spec"]
    assert job["name"] == "train.py"
    assert spec["entry"] == {"script": "train.py", "args": ["--lr", "0.01"]}
    assert spec["model"] is None and spec["data"]["source"] == "script"
    assert spec["data"]["batch_size"] == 32
    assert spec["run_options"]["num_epochs"] == 2 and spec["run_options"]["steps_per_epoch"] == 16
    assert spec["run_options"]["checkpoint_enabled"] is False  # from the config file
    assert spec["data_loading"]["prefetch_depth"] == 4
    assert len(spec["project"]) == 64
    queue = sam(live_server.url, people["alice"], "queue", "--all")
    assert job_id in queue.stdout and "train.py" in queue.stdout


@pytest.mark.slow
def test_sam_run_passes_its_options_and_refuses_a_short_last_batch(
    live_server,
    settings,
    people,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = _copy(tmp_path)
    env = _env(tmp_path)
    sam_cmd = [sys.executable, "-c", "from client.entry import main; main()"]
    connection = ["--url", live_server.url, "--token", people["alice"]]
    done = subprocess.run(
        [*sam_cmd, *connection, "run", "-J", "digits", "--region", "16x16", "train.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().splitlines()[-1].split()[2]
    job = _job(live_server.url, people["alice"], job_id, settings.resolved_database_url)
    assert job["name"] == "digits" and job["spec"]["entry"]["script"] == "train.py"
    assert job["spec"]["resources"]["region"]["rows"] == 16
    shown = sam(live_server.url, people["alice"], "status", job_id, "-o", "json")
    assert json.loads(shown.stdout)["name"] == "digits"

    # 500 digits in batches of 32: the last batch would have 20 rows, which a wafer step
    # compiled for 32 cannot take; nothing is submitted.
    train = folder / "train.py"
    train.write_text(train.read_text().replace("DigitsDataset()", "DigitsDataset(limit=500)"))
    refused = subprocess.run(
        [*sam_cmd, *connection, "run", "train.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 1
    assert "last batch would have 20 rows" in refused.stderr and "drop_last=True" in refused.stderr
