"""`sam submit` through the console script's click-free path (client.entry -> client.fastpath):
the same output and exit status as click's `sam submit`, against the real server, without
importing click or PyYAML; whatever it does not handle goes to click unchanged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from client.fastpath import parse_submit_args
from tests.conftest import ADMIN_TOKEN

# Each run reports on stderr's last line whether click or PyYAML were imported.
PROBE = (
    "import sys\nfrom client.{module} import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
    "print('LOADED', 'click' in sys.modules, 'yaml' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)
JOB = (
    "# a sweep point\nname: sweep\nmodel: {file: model.py, class: Net}\n"
    "data: {source: synthetic, task: regression, input_shape: [8], batch_size: 4}\n"
    "resources:\n  region: {rows: 4, cols: 4}\n  time_limit: 5m\n"
)
MODEL = "import torch.nn as nn\n\n\nclass Net(nn.Linear):\n    def __init__(self):\n        super().__init__(8, 2)\n"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these tests check the client; tests/api covers PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "job.yaml").write_text(JOB)
    (folder / "model.py").write_text(MODEL)
    return folder


@pytest.fixture
def token(live_server) -> str:  # type: ignore[no-untyped-def]
    import httpx

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    base = f"{live_server.url}/api/v1"
    httpx.post(f"{base}/tenants", json={"name": "acme"}, headers=admin).raise_for_status()
    made = httpx.post(f"{base}/tenants/acme/users", json={"name": "ann"}, headers=admin)
    made.raise_for_status()
    return str(made.json()["token"])


def run(module: str, cwd: Path, *args: str, **env: str) -> tuple[int, str, str, tuple[bool, bool]]:
    """(exit status, stdout, stderr without the probe line, (click imported, PyYAML imported))."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    *stderr, probe = done.stderr.splitlines()
    _, click_loaded, yaml_loaded = probe.split()
    loaded = (click_loaded == "True", yaml_loaded == "True")
    return done.returncode, done.stdout, "\n".join(stderr), loaded


def same_shape(text: str) -> str:
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "TIME", text)
    return re.sub(r"\bj[0-9a-z]{11}\b", "JOBID", text)


CASES = [
    ["submit", "job.yaml"],
    ["submit", "job.yaml", "--parsable"],
    ["submit", "--array", "0-3%2", "-H", "job.yaml"],
    ["submit", "job.yaml", "-d", "singleton", "--kill-invalid-depend"],
    ["--context", "", "submit", "job.yaml", "--idempotency-key=k1"],
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_fast_submit_prints_what_click_prints_and_loads_neither_click_nor_yaml(
    live_server, token: str, job_dir: Path, args: list[str]
) -> None:
    env = {"SAM_URL": live_server.url, "SAM_TOKEN": token, "HOME": str(job_dir)}
    fast = run("entry", job_dir, *args, **env)
    slow = run("cli", job_dir, *args, **env)
    assert fast[0] == slow[0] == 0, (fast, slow)
    assert same_shape(fast[1]) == same_shape(slow[1]) and fast[1].strip()
    assert fast[2] == slow[2]
    assert fast[3] == (False, False) and slow[3][0]  # neither click nor PyYAML imported


def test_fast_submit_sends_the_spec_the_file_says(
    live_server, settings, token: str, job_dir: Path
) -> None:
    from sam_server.db.models import Job
    from sam_server.db.session import session_scope

    env = {"SAM_URL": live_server.url, "SAM_TOKEN": token, "HOME": str(job_dir)}
    status, out, _, _ = run("entry", job_dir, "submit", "job.yaml", "-o", "json", **env)
    assert status == 0
    with session_scope(settings.resolved_database_url) as session:
        spec = session.get(Job, json.loads(out)["id"]).spec
    assert spec["data"]["input_shape"] == [8] and spec["data"]["batch_size"] == 4
    assert (spec["resources"]["region"]["rows"], spec["resources"]["region"]["cols"]) == (4, 4)
    assert (spec["model"]["file"], spec["model"]["class"]) == ("model.py", "Net")
    status, out, _, _ = run(
        "entry", job_dir, "submit", "job.yaml", "-o", "json", "-a", "1,3", **env
    )
    assert status == 0 and json.loads(out)["array"]["tasks"] == 2


def test_errors_read_as_clicks_do(live_server, token: str, job_dir: Path) -> None:
    env = {"SAM_URL": live_server.url, "HOME": str(job_dir)}
    for args in (
        ["submit", "job.yaml", "--token", "sam_wrong"],  # 401 with its hint
        ["--url", "http://127.0.0.1:9", "submit", "job.yaml"],  # unreachable
    ):
        fast = run("entry", job_dir, *args, **env)
        slow = run("cli", job_dir, *args, **env)
        assert fast[:3] == slow[:3] and fast[0] == 1 and fast[2].startswith("error: ")
    (job_dir / "bad.yaml").write_text("name: a\nname: b\n")  # the YAML loader's own refusal
    fast = run("entry", job_dir, "submit", "bad.yaml", **env, SAM_TOKEN=token)
    assert fast[0] == 1 and "duplicate key 'name'" in fast[2]


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "missing.yaml"],  # click's usage error, exit 2
        ["submit", "job.yaml", "-o", "yaml"],
        ["submit", "job.yaml", "--bogus"],
        ["submit", "--help"],
    ],
    ids=" ".join,
)
def test_what_the_fast_path_declines_runs_click_unchanged(
    live_server, token: str, job_dir: Path, args: list[str]
) -> None:
    env = {"SAM_URL": live_server.url, "SAM_TOKEN": token, "HOME": str(job_dir)}
    fast = run("entry", job_dir, *args, **env)
    slow = run("cli", job_dir, *args, **env)
    assert fast[0] == slow[0] and same_shape(fast[1]) == same_shape(slow[1])
    assert fast[2] == slow[2] and fast[3][0]  # click ran


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["submit", "J"], {"job_file": "J"}),
        (["--url", "U", "submit", "J", "--token=T"], {"url": "U", "token": "T"}),
        (["--url", "U", "submit", "J", "--url", "V"], {"url": "V"}),
        (["submit", "J", "-a", "0-9%2", "-H", "--parsable"], {"array": "0-9%2", "hold": True}),
        (["submit", "J", "-o", "json"], {"output": "json"}),
        (["submit", "J", "-o", "yaml"], None),
        (["submit", "J", "--wait"], None),
        (["submit", "J", "--dry-run"], None),
        (["submit", "J", "-Ha", "1"], None),
        (["submit", "J", "--array"], None),
        (["submit", "J", "--array", "--hold"], None),
        (["submit", "J", "K"], None),
        (["submit"], None),
        (["queue", "submit"], None),
        (["--version", "submit", "J"], None),
        (["submit", "--", "J"], None),
        (["submit", "missing"], None),
    ],
)
def test_parse_submit_args(tmp_path: Path, monkeypatch, argv: list[str], expected) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "J").write_text("name: x\n")
    (tmp_path / "K").write_text("name: y\n")
    got = parse_submit_args(argv)
    if expected is None:
        assert got is None
    else:
        assert got is not None and expected.items() <= got.items()


def test_a_closed_stdout_ends_quietly_with_status_1_as_clicks_does(
    live_server, token: str, job_dir: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SAM_")},
        "SAM_URL": live_server.url,
        "SAM_TOKEN": token,
        "HOME": str(job_dir),
    }
    results = []
    for module in ("entry", "cli"):
        read_end, write_end = os.pipe()
        os.close(read_end)  # `sam submit job.yaml | head -0`
        done = subprocess.run(
            [sys.executable, "-c", f"import sys\nfrom client.{module} import main\nmain()"]
            + ["submit", "job.yaml"],
            cwd=job_dir,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
        os.close(write_end)
        results.append((done.returncode, done.stderr))
    assert results[0] == results[1] == (1, "")
