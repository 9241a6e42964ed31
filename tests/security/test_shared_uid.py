"""A worker that is not root cannot give a sandbox a uid of its own: tenant code would run as the
worker's uid and could signal, ptrace or read it. Such a worker refuses tenant code unless the
operator set sandbox.allow_shared_uid, which its start logs; `sam up` and `sam demo` refuse to
start, in one line, where the workers would refuse every job.

The non-root worker is uid 1000 in a user namespace (`unshare --map-user=1000`): what a plain
user, or the Dockerfile's USER sam, gets. It stays root outside, so it can still read this
machine's Python under a 0700 /root."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAM = str(Path(sys.executable).parent / "sam")
AS_USER_1000 = ["unshare", "--map-user=1000", "--map-group=1000"]
# What a worker does at start: the settings tree's sandbox section, then the probe.
WORKER_PROBE = """import json, logging
logging.basicConfig(format="%(levelname)s %(message)s")
from compiler.sandbox import probe
from sam_worker.cli import _probe_sandbox
_probe_sandbox()
print(json.dumps(probe()))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    return {**env, "HOME": str(tmp_path), "SAM_DATA_DIR": str(tmp_path / "data"), **extra}


def _worker_start(tmp_path: Path, **extra: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [*AS_USER_1000, sys.executable, "-c", WORKER_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=_env(tmp_path, **extra),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_non_root_worker_refuses_tenant_code_by_default(tmp_path: Path) -> None:
    found, logs = _worker_start(tmp_path)
    assert not found["ok"], found
    assert "tenant code refused" in str(found["missing"])
    assert "runs as uid 1000, not root" in str(found["reason"])
    assert "SAM_SANDBOX_ALLOW_SHARED_UID=1" in str(found["reason"])
    assert "tenant code sandbox UNAVAILABLE" in logs


def test_the_operator_may_allow_a_shared_uid_and_the_worker_says_so(tmp_path: Path) -> None:
    found, logs = _worker_start(tmp_path, SAM_SANDBOX_ALLOW_SHARED_UID="1")
    assert found["ok"] and found["uid"] == "shared with the worker", found
    warning = [line for line in logs.splitlines() if line.startswith("WARNING")]
    assert warning and "SHARING THIS WORKER'S UID 1000" in warning[0], logs
    assert "sandbox.allow_shared_uid" in warning[0]


def test_config_show_lists_the_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [SAM, "config", "show", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, SAM_SANDBOX_ALLOW_SHARED_UID="true"),
    )
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    found = [r for r in rows if r["setting"] == "sandbox.allow_shared_uid"]
    assert found == [
        {
            "setting": "sandbox.allow_shared_uid",
            "value": "True",
            "source": "SAM_SANDBOX_ALLOW_SHARED_UID",
        }
    ], done.stdout + done.stderr


def _start(tmp_path: Path, command: str, prefix: list[str], **extra: str) -> tuple[int, str]:
    with socket.socket() as holder:  # a busy port: were the check missing, it stops there
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        done = subprocess.run(
            [*prefix, SAM, command, "--port", str(holder.getsockname()[1])],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=_env(tmp_path, **extra),
        )
    assert not (tmp_path / "data").exists()  # nothing started, no database made
    return done.returncode, done.stdout + done.stderr


def test_sam_up_and_demo_as_a_plain_user_stop_at_once_saying_what_to_do(tmp_path: Path) -> None:
    for command in ("up", "demo"):
        code, out = _start(tmp_path, command, AS_USER_1000)
        assert code == 1, out
        assert len(out.strip().splitlines()) == 1, out
        assert "cannot sandbox tenant code" in out and "as root" in out, out
        assert "SAM_SANDBOX_ALLOW_SHARED_UID=1" in out


def test_sam_up_and_demo_without_bubblewrap_stop_at_once_saying_what_to_install(
    tmp_path: Path,
) -> None:
    for command in ("up", "demo"):
        code, out = _start(tmp_path, command, [], SAM_SANDBOX_BWRAP="/nonexistent/bwrap")
        assert code == 1, out
        assert len(out.strip().splitlines()) == 1, out
        assert "install the 'bubblewrap' package" in out, out


def test_sam_up_with_a_shared_uid_allowed_says_so_before_it_starts(tmp_path: Path) -> None:
    code, out = _start(tmp_path, "up", AS_USER_1000, SAM_SANDBOX_ALLOW_SHARED_UID="1")
    lines = out.strip().splitlines()
    assert code == 1 and "cannot serve on" in lines[-1], out  # the busy port: it got that far
    assert lines[0].startswith("warning: tenant code will run under your uid 1000"), out
