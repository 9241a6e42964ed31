"""The light client (client/pyproject.toml, distribution `sam-client`) installed alone in a fresh
venv: what it pulls (no torch, Celery, SQLAlchemy, FastAPI; under 40 MB) and `sam submit` with
it against the real server. pip resolves from the configured indexes (the machine's local wheel
folders and PyPI), as a login node would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.client.light_venv import build_light_venv
from tests.client.test_cli_acct import JOB, MODEL, people  # noqa: F401 (fixture)

HEAVY = {"torch", "celery", "sqlalchemy", "fastapi", "uvicorn", "pydantic", "numpy", "alembic"}
MAX_MB = 40.0


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.mark.slow
def test_light_client_installs_alone_and_submits(live_server, people, tmp_path):  # noqa: F811
    bin_dir, added_mb = build_light_venv(tmp_path)
    listed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "sam-client" in installed and "httpx" in installed
    assert installed & HEAVY == set(), installed
    assert added_mb < MAX_MB, f"the client install added {added_mb:.1f} MB"
    # Nothing of the server side is importable there; the CLI does not try. (-I: a PYTHONPATH
    # that points at the checkout, as the targeted test runs set, must not lend it the server.)
    probe = subprocess.run(
        [str(bin_dir / "python"), "-I", "-c", "import importlib.util as u; print([m for m in "
         f"{sorted(HEAVY | {'sam_server', 'sam_worker', 'compiler'})!r} if u.find_spec(m)])"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]"
    # `from sam import Runner` (docs/runner.md) comes with it and imports no torch.
    runner = subprocess.run(
        [str(bin_dir / "python"), "-I", "-c", "import sys; from sam import Runner; "
         "print(Runner.__name__, sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert runner.stdout.split() == ["Runner", "[]"]

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "model.py").write_text(MODEL)
    (folder / "job.yaml").write_text(JOB.format(name="from-login-node"))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "SAM_URL": live_server.url}
    env["SAM_TOKEN"] = people["alice"]
    sam = str(bin_dir / "sam")
    submitted = subprocess.run(
        [sam, "submit", "job.yaml", "--parsable"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    shown = subprocess.run(
        [sam, "status", job_id, "-o", "json"], env=env, capture_output=True, text=True
    )
    assert json.loads(shown.stdout)["name"] == "from-login-node"
    server_side = subprocess.run([sam, "up"], env=env, capture_output=True, text=True)
    assert server_side.returncode == 1 and "sam-scheduler" in server_side.stderr
