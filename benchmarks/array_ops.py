"""Bulk operations on a 100,000-task array while another tenant works (issue 29).

Starts `sam server` (2 workers) and `sam scheduler` on a fresh database (SQLite under a temp
directory, or a new PostgreSQL database), then as tenant `bench`:

- submits `"array": "0-99999%1"` in one request (submit_100k_s),
- holds and then releases the whole array (hold_release_100k_s, both requests),
- cancels it (cancel_100k_s),
- submits a 10,000-task array and cancels it (cancel_10k_s),

checking each answer's counts and the states in the database. All along, tenant `other` lists
its jobs (`GET /jobs`) and submits a small job every fifth call, back to back; the p99 of its
calls during the bulk work is other_tenant_p99_ms (a call that fails counts as its timeout).
Ends with one JSON line:
{"db", "submit_100k_s", "hold_release_100k_s", "cancel_100k_s", "cancel_10k_s",
 "other_tenant_p99_ms", "other_tenant_max_ms", "other_tenant_calls"}.

    python benchmarks/array_ops.py --db sqlite|postgres [--tasks 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_submit import ADMIN, SPEC, fresh_database, start_server  # noqa: E402
from array_submit import free_port  # noqa: E402

TIMEOUT_S = 120.0


def make_user(base: str, tenant: str, name: str) -> dict[str, str]:
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.post(f"{base}/api/v1/tenants", json={"name": tenant}, headers=admin).raise_for_status()
    made = httpx.post(f"{base}/api/v1/tenants/{tenant}/users", json={"name": name}, headers=admin)
    made.raise_for_status()
    return {"Authorization": f"Bearer {made.json()['token']}"}


def start_scheduler(url: str | None, data_dir: str) -> subprocess.Popen:  # type: ignore[type-arg]
    env = dict(os.environ, SAM_ADMIN_TOKEN=ADMIN, SAM_DATA_DIR=data_dir, SAM_LOG_LEVEL="WARNING")
    env.pop("SAM_DATABASE_URL", None)
    if url is not None:
        env["SAM_DATABASE_URL"] = url
    sam = [sys.executable, "-c", "import sys; from client.cli import main; main(sys.argv[1:])"]
    return subprocess.Popen(
        [*sam, "scheduler", "--interval", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Probe(threading.Thread):
    """Tenant `other`: GET /jobs, and a small submit every fifth call, back to back."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.base, self.headers = base, headers
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {"spec": {**SPEC, "name": "small"}, "files": {}}
        with httpx.Client(base_url=self.base, headers=self.headers, timeout=TIMEOUT_S) as client:
            calls = 0
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    if calls % 5 == 4:
                        r = client.post("/api/v1/jobs", json=body)
                        ok = r.status_code == 201
                    else:
                        r = client.get("/api/v1/jobs", params={"limit": 50})
                        ok = r.status_code == 200
                    if not ok:
                        self.failures.append(f"{r.status_code}: {r.text[:200]}")
                    took = time.perf_counter() - started if ok else TIMEOUT_S
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    took = TIMEOUT_S
                self.latencies.append(took)
                calls += 1
                self.stop.wait(0.02)


def timed(call: httpx.Client, method: str, path: str, **kw: object) -> tuple[float, dict]:  # type: ignore[type-arg]
    started = time.perf_counter()
    r = call.request(method, path, **kw)  # type: ignore[arg-type]
    took = time.perf_counter() - started
    if r.status_code not in (200, 201, 202):
        raise SystemExit(f"{method} {path} answered {r.status_code}: {r.text[:500]}")
    return took, r.json()


def states(url: str, array_id: str) -> dict[str, int]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT state, count(*) FROM jobs WHERE array_job_id = :a GROUP BY state"),
                {"a": array_id},
            ).all()
            return {str(s): int(n) for s, n in rows}
    finally:
        engine.dispose()


def run(db: str, tasks: int) -> dict[str, object]:
    data_dir = tempfile.mkdtemp(prefix="sam-arrayops-")
    url = fresh_database() if db == "postgres" else None
    db_url = url or f"sqlite:///{Path(data_dir).resolve() / 'sam.db'}"
    port = free_port()
    server = start_server(url, port, 2, data_dir)
    scheduler = start_scheduler(url, data_dir)
    base = f"http://127.0.0.1:{port}"
    figures: dict[str, object] = {"db": db}
    try:
        bench = make_user(base, "bench", "u")
        probe = Probe(base, make_user(base, "other", "o"))
        with httpx.Client(base_url=base, headers=bench, timeout=600) as api:
            timed(api, "POST", "/api/v1/jobs", json={"spec": {**SPEC, "array": "0-9"}})  # warm
            probe.start()
            time.sleep(2)
            body = {"spec": {**SPEC, "array": f"0-{tasks - 1}%1"}, "files": {}}
            took, made = timed(api, "POST", "/api/v1/jobs", json=body)
            figures["submit_100k_s"] = round(took, 2)
            array_id = made["id"]
            assert sum(states(db_url, array_id).values()) == tasks
            took_hold, held = timed(api, "POST", f"/api/v1/jobs/{array_id}/hold")
            took_release, freed = timed(api, "POST", f"/api/v1/jobs/{array_id}/release")
            assert held["changed_count"] + held["unchanged_count"] == tasks, held["unchanged"][:3]
            assert freed["changed_count"] == held["changed_count"], freed["unchanged"][:3]
            figures["hold_release_100k_s"] = round(took_hold + took_release, 2)
            took, gone = timed(api, "POST", f"/api/v1/jobs/{array_id}/cancel")
            figures["cancel_100k_s"] = round(took, 2)
            left = states(db_url, array_id)
            assert set(left) <= {"cancelled", "cancelling"}, left
            small = {"spec": {**SPEC, "array": "0-9999"}, "files": {}}
            _, made = timed(api, "POST", "/api/v1/jobs", json=small)
            took, _ = timed(api, "POST", f"/api/v1/jobs/{made['id']}/cancel")
            figures["cancel_10k_s"] = round(took, 2)
            assert set(states(db_url, made["id"])) <= {"cancelled", "cancelling"}
            probe.stop.set()
            probe.join(TIMEOUT_S)
        lat = sorted(probe.latencies)
        figures["other_tenant_p99_ms"] = round(1000 * lat[int(0.99 * (len(lat) - 1))], 1)
        figures["other_tenant_max_ms"] = round(1000 * lat[-1], 1)
        figures["other_tenant_calls"] = len(lat)
        if probe.failures:
            print(f"other tenant's failed calls: {probe.failures[:5]}", file=sys.stderr)
        figures["other_tenant_failures"] = len(probe.failures)
        figures["scheduler_alive"] = scheduler.poll() is None
    finally:
        for proc in (scheduler, server):
            proc.terminate()
            proc.wait(20)
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    print(json.dumps(run(args.db, args.tasks)))


if __name__ == "__main__":
    main()
