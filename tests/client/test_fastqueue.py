"""`sam queue`'s fast path (no click) prints what click's command prints, against the real server,
and declines every command line it does not handle before sending or printing anything."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from client.fastqueue import parse_queue_args, queue_quickly
from tests.client.test_cli_arrays import JOB
from tests.client.test_cli_e2e import MODEL, sam
from tests.conftest import ADMIN_TOKEN

REPO = Path(__file__).resolve().parents[2]


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
    project = tmp_path / "project"  # its own folder: the server keeps its database in tmp_path
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    path = project / "job.yaml"
    path.write_text(JOB)
    return path


def test_it_reads_the_tables_options_and_declines_the_rest() -> None:
    args = parse_queue_args(
        ["--url", "http://h:1", "queue", "-t", "PD", "--state=R,CG", "-u", "bob", "-r"]
        + ["-j", "j1,j2", "--jobs", "j3", "--noheader", "--token", "t"]
    )
    assert args is not None
    assert (args["url"], args["token"], args["user"]) == ("http://h:1", "t", "bob")
    assert args["state"] == ["PD", "R,CG"] and args["jobs"] == ["j1,j2", "j3"]
    assert args["array"] and args["no_headers"] and not args.get("all")
    for declined in (
        ["queue", "--help"],
        ["queue", "-h"],
        ["queue", "--watch"],
        ["queue", "-i", "5"],
        ["queue", "-o", "json"],
        ["queue", "--format", "jobid"],
        ["queue", "extra"],
        ["queue", "-rj", "x"],
        ["queue", "--user"],
        ["--bogus", "queue"],
        ["status", "queue"],
    ):
        assert parse_queue_args(declined) is None, declined


def test_an_unknown_state_or_no_server_declines_or_fails_cleanly(capsys) -> None:  # type: ignore[no-untyped-def]
    # unknown state: click's usage error will say it; nothing sent, nothing printed
    assert queue_quickly(["--url", "http://127.0.0.1:1", "queue", "-t", "bogus"]) is None
    assert capsys.readouterr() == ("", "")
    assert queue_quickly(["--url", "http://127.0.0.1:1", "--token", "t", "queue"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "cannot reach SAM at http://127.0.0.1:1" in err


def _same(text: str) -> str:
    """A table with its TIME cells (which tick between two runs) and padding blanked."""
    return re.sub(r" +", " ", re.sub(r"\b\d+(-\d+)?(:\d\d)+\b", "T", text))


def test_the_fast_path_prints_what_clicks_command_prints(
    live_server, user, job_file, capsys
) -> None:  # type: ignore[no-untyped-def]
    url = live_server.url
    out = sam(url, user, "submit", str(job_file), "--array", "0-4,7,9-11")
    assert out.exit_code == 0, out.stderr
    array_id = out.stdout.split()[3]
    held = sam(url, user, "submit", str(job_file), "--array", "20", "--hold")
    assert held.exit_code == 0, held.stderr
    assert sam(url, user, "hold", f"{array_id}_9").exit_code == 0
    for argv in (
        [],
        ["--array"],
        ["-j", array_id],
        ["--me", "-t", "Q", "--noheader"],
        ["--all", "--state", "queued,PD"],
        ["-u", "nobody"],
    ):
        slow = sam(url, user, "queue", *argv)
        assert slow.exit_code == 0, slow.stderr
        capsys.readouterr()
        assert queue_quickly(["--url", url, "--token", user, "queue", *argv]) == 0
        fast = capsys.readouterr().out
        assert _same(fast) == _same(slow.stdout), argv
    assert f"{array_id}_[0-4,7,9-11]" in fast or argv == ["-u", "nobody"]


def test_the_console_script_takes_the_fast_path_without_importing_click(live_server, user) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import sys\nfrom client.entry import main\n"
        "try: main(['queue'])\nexcept SystemExit as e: print('exit', e.code)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'httpx', 'yaml')))"
    )
    env = {"SAM_URL": live_server.url, "SAM_TOKEN": user, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[0] == "JOBID" and lines[-2:] == ["exit 0", "[]"], done.stderr
