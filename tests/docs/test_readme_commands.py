"""The README's "A first job" block, run as written in a copy of the repository: the commands a
new user types first must work (slow: it starts the whole local cluster)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def first_job_block(readme: str) -> list[str]:
    """The lines of the bash block under the README's "A first job" heading."""
    section = readme.split("\n## A first job\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "README.md's 'A first job' has no bash block"
    return found.group(1).strip().splitlines()


def as_script(lines: list[str], port: int) -> str:
    """The block as a bash script, changed only where a script cannot do what a person does:
    the venv that runs the tests stands for `.venv` (activated through PATH), `sam up` logs to a
    file and the script waits for its "SAM is up at" line (a person waits for it on screen), the
    port is a free one instead of 8000, JOBID is the id `sam submit` printed, and the cluster is
    stopped at the end."""
    out = ["set -euo pipefail", f"export PATH={Path(sys.executable).parent}:$PATH SAM_PORT={port}"]
    for line in lines:
        command = line.split("  #", 1)[0].strip()
        if command == ". .venv/bin/activate":
            continue
        if command == "sam up &":
            out += ["sam up > up.log 2>&1 &", "UP=$!"]
            out.append(
                "for _ in $(seq 240); do grep -q 'SAM is up at' up.log && break; sleep 0.5; done"
            )
            out.append("grep -q 'SAM is up at' up.log || { cat up.log; exit 1; }")
            continue
        command = command.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        if command.startswith("sam submit ") and "--wait" in command:
            out.append(f"JOBID=$({command} | sed -n 's/^Submitted job \\([^ ]*\\) .*/\\1/p')")
            out.append('test -n "$JOBID"')
            continue
        out.append(command.replace("JOBID", '"$JOBID"'))
    out += ['echo "JOBID=$JOBID"', "kill $UP; wait $UP || true"]
    return "\n".join(out) + "\n"


def test_the_readme_first_job_runs_as_written(tmp_path: Path) -> None:
    clone = tmp_path / "sam"
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env |= {"HOME": str(tmp_path), "PYTHONPATH": str(clone)}
    script = as_script(first_job_block((clone / "README.md").read_text()), free_port())
    done = subprocess.run(
        ["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{script}\n{out[-4000:]}"
    job_id = re.search(r"JOBID=(\S+)", done.stdout)
    assert job_id, out[-4000:]
    assert "mlp-synthetic" in done.stdout  # sam queue --all
    assert "LOSS" in done.stdout  # sam metrics
    assert (clone / job_id.group(1) / "checkpoints" / "step-00000010.npz").is_file()


def test_the_script_follows_the_block() -> None:
    lines = first_job_block((ROOT / "README.md").read_text())
    script = as_script(lines, 9999)
    assert "sam up > up.log 2>&1 &" in script
    assert "127.0.0.1:8000" not in script and "127.0.0.1:9999" in script
    assert any(line.startswith("JOBID=$(sam submit ") for line in script.splitlines())
    assert sum("sam " in line for line in lines) <= sum("sam " in s for s in script.splitlines())
