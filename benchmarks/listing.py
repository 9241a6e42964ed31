"""Listings at volume, end to end: the real `sam` CLI (a new process each time, as a user types
it) against a real `sam server` process on SQLite, beside Slurm's squeue when it is installed.

- queue_10k_ms: `sam queue` of a tenant with 10,000 held jobs (every one a row).
- array_line_ms: `sam queue` of a tenant whose one 10,000-task array waits: one line,
  `ID_[0-9999]`, with its tasks counted by state.
- queue_array_expand_ms: `sam queue --array` of that tenant: 10,000 rows.
- help_ms: `sam --help`.
- server_*_ms: the GET /jobs requests alone (the slim page the CLI reads), from a warm client.

Each figure is the median of `--runs` runs (after one warm-up). The server runs alone (no
scheduler, no workers), so nothing moves the jobs while they are measured. `squeue` figures are
taken the same way when `squeue` answers on this machine; otherwise the JSON says why not.
Usage: `python benchmarks/listing.py [--jobs N] [--runs N]`. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from sam_server.db.models import Job  # noqa: E402
from sam_server.db.session import session_scope  # noqa: E402
from tests.conftest import ADMIN_TOKEN  # noqa: E402
from tests.e2e.server_process import SAM, ServerProcess  # noqa: E402

SPEC = {
    "name": "bench",
    "model": {"builtin": "mlp"},
    "data": {"source": "synthetic", "task": "regression", "input_shape": [8], "batch_size": 4},
    "resources": {"region": {"rows": 4, "cols": 4}, "time_limit": "5m"},
}


def user_token(base: str, tenant: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    httpx.post(f"{base}/tenants", json={"name": tenant}, headers=admin).raise_for_status()
    made = httpx.post(f"{base}/tenants/{tenant}/users", json={"name": "u"}, headers=admin)
    made.raise_for_status()
    return str(made.json()["token"])


def submit(base: str, token: str, spec: dict[str, Any]) -> str:
    made = httpx.post(
        f"{base}/jobs",
        json={"spec": spec, "files": {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=600,
    )
    made.raise_for_status()
    return str(made.json()["id"])


def seed_held(db_url: str, template_id: str, jobs: int) -> None:
    """Clone the template into `jobs` held jobs (the template among them)."""
    with session_scope(db_url) as s:
        template = s.get(Job, template_id)
        assert template is not None
        row = {c.name: getattr(template, c.key) for c in Job.__table__.columns}
        template.hold, template.reason = "user", "JobHeldUser"
    clones = [
        row
        | {"id": f"{template_id}{i:05d}", "seq": row["seq"] + i, "name": f"bench-{i}"}
        | {"idempotency_key": None, "hold": "user", "reason": "JobHeldUser"}
        for i in range(1, jobs)
    ]
    for start in range(0, len(clones), 2000):
        with session_scope(db_url) as s:
            s.execute(insert(Job), clones[start : start + 2000])


def median_ms(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, str]:
    """The median wall time of `argv` (one warm-up run first) and its last stdout."""
    out = ""
    times = []
    for i in range(runs + 1):
        began = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
        if i:
            times.append((time.perf_counter() - began) * 1000)
        out = done.stdout
    return round(statistics.median(times), 1), out


def server_ms(base: str, token: str, params: dict[str, Any], runs: int) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    times = []
    with httpx.Client(timeout=60) as client:
        for i in range(runs + 1):
            began = time.perf_counter()
            client.get(f"{base}/jobs", params=params, headers=headers).raise_for_status()
            if i:
                times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times), 1)


def slurm_figures(runs: int) -> dict[str, Any]:
    """squeue's time for the same listings, where a Slurm controller answers here."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return {"squeue": "not installed (apt-get install slurm-wlm, and a running slurmctld)"}
    try:
        ms, _ = median_ms([squeue], dict(os.environ), runs)
    except subprocess.CalledProcessError as exc:
        return {"squeue": f"installed but not answering: {exc.stderr.strip()[:200]}"}
    return {"squeue_ms": ms, "squeue": "the jobs queued on this machine's Slurm, not SAM's"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{tmp}/sam.db"
        server = ServerProcess(db_url, Path(tmp) / "data").start()
        try:
            base = server.url + "/api/v1"
            held = user_token(base, "held")
            seed_held(db_url, submit(base, held, SPEC), args.jobs)
            swept = user_token(base, "swept")
            array_id = submit(base, swept, SPEC | {"array": f"0-{args.jobs - 1}"})

            env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
            env |= {"SAM_URL": server.url, "PYTHONPATH": str(REPO)}
            out: dict[str, Any] = {}
            ms, text = median_ms([SAM, "queue"], env | {"SAM_TOKEN": held}, args.runs)
            assert len(text.splitlines()) == args.jobs + 1, "a header and a row per job"
            out["queue_10k_ms"] = ms
            ms, text = median_ms([SAM, "queue"], env | {"SAM_TOKEN": swept}, args.runs)
            lines = text.splitlines()
            assert len(lines) == 2 and f"{array_id}_[0-{args.jobs - 1}]" in lines[1], lines
            out["array_line_ms"] = ms
            argv = [SAM, "queue", "--array"]
            ms, text = median_ms(argv, env | {"SAM_TOKEN": swept}, args.runs)
            assert len(text.splitlines()) == args.jobs + 1
            out["queue_array_expand_ms"] = ms
            out["help_ms"], _ = median_ms([SAM, "--help"], env, args.runs)
            slim = {"view": "slim", "limit": args.jobs}
            out["server_10k_slim_ms"] = server_ms(base, held, slim, args.runs)
            out["server_array_line_ms"] = server_ms(base, swept, slim, args.runs)
            out["server_10k_full_500_ms"] = server_ms(base, held, {"limit": 500}, args.runs)
            out |= slurm_figures(args.runs)
            out |= {"jobs": args.jobs, "runs": args.runs, "db": "sqlite", "cpus": os.cpu_count()}
        finally:
            server.kill()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
