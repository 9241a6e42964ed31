"""`sam acct`, `sam report usage`, `--format`, `queue --watch`, contexts and completion, run
against the real server (uvicorn on a free port); jobs end through the lifecycle's own calls."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click.testing
import pytest
from sqlalchemy import delete

from client.cli import build_cli
from sam_server.db.models import Job, JobAttempt
from sam_server.db.session import session_scope
from tests.api.test_accounting import run_and_end
from tests.conftest import ADMIN_TOKEN

SAM = [sys.executable, "-c", "import sys; from client.cli import main; main(sys.argv[1:])"]
JOB = """\
name: {name}
model: {{file: model.py, class: Net}}
data: {{source: synthetic, task: regression, input_shape: [8], batch_size: 4}}
resources: {{region: {{rows: 4, cols: 4}}, time_limit: 5m}}
"""
MODEL = "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 2)\n    def forward(self, x):\n        return self.fc(x)\n"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these tests check the client; tests/api covers PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


def sam(url: str | None, token: str | None, *args: str) -> click.testing.Result:
    prefix = [*(["--url", url] if url else []), *(["--token", token] if token else [])]
    return click.testing.CliRunner().invoke(build_cli(dict), [*prefix, *args])


def submit(url: str, token: str, tmp_path: Path, name: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.py").write_text(MODEL)
    (folder / "job.yaml").write_text(JOB.format(name=name))
    done = sam(url, token, "submit", str(folder / "job.yaml"), "--parsable")
    assert done.exit_code == 0, done.output
    return done.stdout.strip()


@pytest.fixture
def people(live_server) -> dict[str, str]:  # type: ignore[no-untyped-def]
    url = live_server.url
    tokens = {}
    for tenant, user in (("acme", "alice"), ("acme", "carol"), ("globex", "bob")):
        sam(url, ADMIN_TOKEN, "admin", "tenant", "create", tenant)
        made = sam(url, ADMIN_TOKEN, "admin", "user", "create", tenant, user)
        assert made.exit_code == 0, made.output
        tokens[user] = made.stdout.strip()
    return tokens


def test_acct_lists_ended_jobs_after_they_are_purged(live_server, settings, people, tmp_path):
    url, db = live_server.url, settings.resolved_database_url
    alice, carol, bob = people["alice"], people["carol"], people["bob"]
    ok = submit(url, alice, tmp_path, "sweep-ok")
    bad = submit(url, alice, tmp_path, "sweep-bad")
    other = submit(url, carol, tmp_path, "carols")
    run_and_end(db, ok, hours=2, outcome="succeeded")
    run_and_end(db, bad, hours=1, outcome="failed", error=("numerical", "loss is nan"))
    run_and_end(db, other, hours=1, outcome="succeeded")
    with session_scope(db) as s:  # retention purges the job rows
        s.execute(delete(JobAttempt))
        s.execute(delete(Job))
    assert sam(url, alice, "status", ok).exit_code == 1  # gone from the queue...

    listed = sam(url, alice, "acct", "-S", "now-1day", "-o", "json")  # ...not from accounting
    assert listed.exit_code == 0, listed.output
    records = {r["job_id"]: r for r in json.loads(listed.stdout)}
    assert set(records) == {ok, bad}  # like sacct: only my own jobs by default
    assert records[bad]["exit_kind"] == "numerical"
    assert abs(records[ok]["pe_hours"] - 32) < 0.1

    table = sam(url, alice, "acct", "-S", "now-1day")  # the default table, sacct's columns
    assert table.exit_code == 0, table.output
    header, *lines = table.stdout.splitlines()
    assert header.split()[:5] == ["JobID", "JobName", "Tenant", "User", "State"]
    assert {line.split()[0] for line in lines} == {ok, bad}
    assert any("FAILED" in line and "numerical" in line for line in lines)

    failed = sam(url, alice, "acct", "-S", "now-1day", "--state", "F", "-o", "csv",
                 "--format", "jobid,state,pehours,region")  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(failed.stdout)))
    assert [(r["JobID"], r["State"], round(float(r["PEHours"])), r["Region"]) for r in rows] == [
        (bad, "FAILED", 16, "wse-0:2,3+4x4")
    ]
    piped = sam(url, alice, "acct", "-S", "now-1day", "-a", "-P", "-n", "--fields", "user,jobname")
    assert sorted(piped.stdout.split()) == ["alice|sweep-bad", "alice|sweep-ok", "carol|carols"]
    assert sam(url, bob, "acct", "-S", "now-1day", "-a", "-o", "json").stdout.strip() == "[]"
    # A period before the jobs existed: nothing; bad times and columns are usage errors (2).
    assert (
        json.loads(
            sam(url, alice, "acct", "-S", "now-3days", "-E", "now-2days", "-o", "json").stdout
        )
        == []
    )
    wrong_time = sam(url, alice, "acct", "-S", "last tuesday")
    assert wrong_time.exit_code == 2 and "now-7days" in wrong_time.output
    wrong_column = sam(url, alice, "acct", "--format", "jobid,cpus")
    assert wrong_column.exit_code == 2 and "pehours" in wrong_column.output

    usage = sam(url, ADMIN_TOKEN, "report", "usage", "-S", "now-1day", "-o", "csv")
    assert usage.exit_code == 0, usage.output
    by_user = {
        (r["Tenant"], r["User"]): round(float(r["PEHours"]))
        for r in csv.DictReader(io.StringIO(usage.stdout))
    }
    assert by_user == {("acme", "alice"): 48, ("acme", "carol"): 16}
    per_tenant = sam(url, alice, "report", "usage", "-S", "now-1day", "--by", "tenant", "-P", "-n")
    tenant, hours, jobs, share = per_tenant.stdout.strip().split("|")
    assert (tenant, round(float(hours)), jobs, share) == ("acme", 64, "3", "100.00%")


def test_format_columns_on_queue_cluster_and_tokens(live_server, people, tmp_path):
    url, alice = live_server.url, people["alice"]
    job = submit(url, alice, tmp_path, "fmt")
    queue = sam(url, alice, "queue", "--format", "jobid,name%2,st,priority")
    assert queue.exit_code == 0, queue.output
    assert queue.stdout.split() == ["JobID", "Name", "ST", "Priority", job, "f~", "Q", "normal"]
    tokens = sam(url, alice, "token", "list", "--fields", "user,tenant")
    assert tokens.stdout.split() == ["USER", "TENANT", "alice", "acme"]
    cluster = sam(url, ADMIN_TOKEN, "cluster", "--format", "wafer,size")
    assert cluster.exit_code == 0 and cluster.stdout.split()[:2] == ["WAFER", "SIZE"]
    assert sam(url, alice, "queue", "--format", "bogus").exit_code == 2


def test_contexts_pick_the_server_and_token(live_server, people, isolated_config):
    url, alice = live_server.url, people["alice"]
    made = sam(None, None, "config", "set-context", "prod", "--url", url, "--token", alice)
    assert made.exit_code == 0, made.output
    sam(None, None, "config", "set-context", "old", "--url", "http://127.0.0.1:9", "--token", "x")
    assert sam(None, None, "config", "use-context", "nope").exit_code == 2
    assert sam(None, None, "config", "use-context", "prod").exit_code == 0
    me = sam(None, None, "whoami", "-o", "json")
    assert me.exit_code == 0, me.output
    assert json.loads(me.stdout)["name"] == "alice"
    listed = sam(None, None, "config", "get-contexts").stdout
    assert "* " in listed.splitlines()[2] or "*" in listed  # prod is current
    assert alice not in listed  # tokens are masked
    assert sam(None, None, "--context", "old", "whoami").exit_code == 1  # unreachable server
    assert sam(None, None, "config", "current-context").stdout.strip() == "prod"


def test_queue_watch_redraws_until_ctrl_c_then_exits_0(live_server, people, tmp_path):
    url, alice = live_server.url, people["alice"]
    submit(url, alice, tmp_path, "watched")
    env = {**os.environ, "SAM_URL": url, "SAM_TOKEN": alice}
    watcher = subprocess.Popen(
        [*SAM, "queue", "--watch", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    deadline = time.monotonic() + 60
    seen = ""
    while time.monotonic() < deadline and seen.count("watched") < 2:
        line = watcher.stdout.readline()  # type: ignore[union-attr]
        seen += line
    watcher.send_signal(signal.SIGINT)
    out, err = watcher.communicate(timeout=30)
    assert seen.count("watched") >= 2, seen + err  # redrawn
    assert watcher.returncode == 0, err
    assert "Traceback" not in err


def test_completion_script_and_completions() -> None:
    script = subprocess.run(
        [*SAM, "completion", "bash"], capture_output=True, text=True, check=True
    )
    assert "_SAM_COMPLETE=bash_complete" in script.stdout and "complete -o" in script.stdout
    env = {
        **os.environ,
        "_SAM_COMPLETE": "bash_complete",
        "COMP_WORDS": "sam ac",
        "COMP_CWORD": "1",
    }
    # click's completion runs when the program is named sam: the console script.
    sam_script = Path(sys.executable).with_name("sam")
    answer = subprocess.run([str(sam_script)], env=env, capture_output=True, text=True)
    assert "plain,acct" in answer.stdout.splitlines()
    env.update(COMP_WORDS="sam acct --st", COMP_CWORD="2")
    answer = subprocess.run([str(sam_script)], env=env, capture_output=True, text=True)
    assert {"--starttime", "--state"} <= set(answer.stdout.replace(",", "\n").split())
    for shell in ("zsh", "fish"):
        assert (
            subprocess.run([*SAM, "completion", shell], capture_output=True, text=True).returncode
            == 0
        )
