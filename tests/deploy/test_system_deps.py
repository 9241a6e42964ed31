"""scripts/system-deps: a machine without bubblewrap hears what to install before SAM starts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-deps"
BASH = shutil.which("bash") or "/bin/bash"


def _bin(tmp_path: Path, uid: int, tools: tuple[str, ...]) -> Path:
    """A PATH holding only a stub `id` (the uid) and stubs of the given tools."""
    path = tmp_path / "bin"
    path.mkdir()
    for name, body in {"id": f"echo {uid}", **{tool: "true" for tool in tools}}.items():
        stub = path / name
        stub.write_text(f"#!{BASH}\n{body}\n")
        stub.chmod(0o755)
    return path


def _run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(path)}
    return subprocess.run(
        [BASH, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=30
    )


def test_a_user_without_bubblewrap_is_told_in_one_line_what_to_install(tmp_path: Path) -> None:
    done = _run(_bin(tmp_path, 1000, ()))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "SAM needs bubblewrap" in done.stderr and "apt-get install bubblewrap" in done.stderr


def test_the_tests_also_need_promtool_and_chromium(tmp_path: Path) -> None:
    done = _run(_bin(tmp_path, 1000, ("bwrap",)), "--test")
    assert done.returncode == 1
    assert "SAM needs prometheus chromium" in done.stderr


def test_nothing_to_do_when_everything_is_there(tmp_path: Path) -> None:
    done = _run(_bin(tmp_path, 1000, ("bwrap", "promtool", "chromium")), "--test")
    assert (done.returncode, done.stderr) == (0, "")
