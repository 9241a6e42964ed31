"""The policy is pure: importing and running it pulls in no database, web, broker or torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_policy_imports_no_database_web_broker_or_torch() -> None:
    code = (
        "import sys\n"
        "import sam_server.scheduling, sam_server.replay.sim, sam_server.replay.cli\n"
        "bad = [m for m in ('sqlalchemy', 'fastapi', 'celery', 'torch') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
