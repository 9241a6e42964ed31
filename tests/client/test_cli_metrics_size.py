"""`sam metrics` on a long run: a short table by default, the whole run only when asked, and the
server (not the client) does the trimming and sampling. Against the real server (uvicorn)."""

from __future__ import annotations

import json
from pathlib import Path

import click.testing
import httpx
import pytest

from client.cli import build_cli
from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, spec, submit

STEPS = 2_000


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: the sampling is plain Python over the steps the database returns."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


def sam(url: str, token: str, *args: str) -> click.testing.Result:
    runner = click.testing.CliRunner()
    return runner.invoke(build_cli(), ["--url", url, "--token", token, *args])


@pytest.fixture
def long_run(live_server, settings) -> tuple[str, str, str]:  # type: ignore[no-untyped-def]
    """A running job with 2,000 recorded steps (100 per epoch); (url, token, job id)."""
    with httpx.Client(base_url=live_server.url) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        body = spec(run_options={"num_epochs": 20, "steps_per_epoch": 100})
        job_id = submit(client, alice, body_spec=body).json()["id"]
        assert client.get("/api/v1/whoami", headers=ADMIN).status_code == 200
    url = settings.resolved_database_url
    with session_scope(url) as s:
        job = s.get(Job, job_id)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
        job.lease_owner, job.attempts = "w", 1
    steps = [
        {"step": i, "loss": 3.0 / (1 + i), "sim_cycles": 1000, "samples_per_sec": 512.0}
        for i in range(STEPS)
    ]
    for at in range(0, STEPS, 250):
        with session_scope(url) as s:
            assert lifecycle.record_steps(
                s, job_id=job_id, owner="w", attempt=1, steps=steps[at : at + 250], lines=[]
            )
    return live_server.url, alice["Authorization"].split()[1], job_id


def _step_column(stdout: str) -> list[int]:
    table = stdout.split("\n\n")[0].splitlines()
    assert table[0].split()[:2] == ["STEP", "LOSS"]
    return [int(line.split()[0]) for line in table[1:]]


def test_the_default_table_is_the_newest_20_steps_and_says_so(long_run) -> None:  # type: ignore[no-untyped-def]
    url, token, job_id = long_run
    result = sam(url, token, "metrics", job_id)
    assert result.exit_code == 0, result.output
    assert _step_column(result.stdout) == list(range(STEPS - 20, STEPS))
    assert "final_loss" in result.stdout and len(result.stdout) < 4_000
    assert "--all" in result.stderr and "newest 20 steps" in result.stderr


def test_every_samples_the_whole_run_on_the_server(long_run) -> None:  # type: ignore[no-untyped-def]
    url, token, job_id = long_run
    result = sam(url, token, "metrics", job_id, "--every", "500")
    assert result.exit_code == 0, result.output
    assert _step_column(result.stdout) == [0, 500, 1000, 1500, 1999]  # and always the newest
    assert _step_column(
        sam(url, token, "metrics", job_id, "--last", "3", "--every", "2").stdout
    ) == [
        1998,
        1999,
    ]
    sampled = httpx.get(
        f"{url}/api/v1/jobs/{job_id}/metrics",
        params={"every": 500},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert [s["step"] for s in sampled.json()["steps"]] == [0, 500, 1000, 1500, 1999]
    assert len(sampled.content) < 10_000, "sampled on the server, not after a full download"
    # epochs are summarized over every step, not over the sample
    assert sampled.json()["epochs"][0]["steps"] == 100


def test_all_and_json_still_give_every_step(long_run) -> None:  # type: ignore[no-untyped-def]
    url, token, job_id = long_run
    everything = sam(url, token, "metrics", job_id, "--all")
    assert _step_column(everything.stdout) == list(range(STEPS))
    assert "newest 10 of 20 epochs" in everything.stderr
    data = json.loads(sam(url, token, "metrics", job_id, "-o", "json").stdout)
    assert len(data["steps"]) == STEPS and len(data["epochs"]) == 20
    clash = sam(url, token, "metrics", job_id, "--all", "--last", "5")
    assert clash.exit_code == 2 and "--all" in clash.stderr
