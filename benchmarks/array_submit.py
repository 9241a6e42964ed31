"""Job array creation through the API: tasks per second of ONE `POST /api/v1/jobs` request
with `array: 0-N` (issue 13's goal: at least 10,000 tasks/s on the 2-core machine).

Starts `sam server` on a fresh PostgreSQL database (as api_submit.py does), creates a user and
submits arrays of N tasks: a spec without `${SAM_ARRAY_TASK_ID}` (validated once for all tasks)
and one with it in two values (every task's spec validated and hashed). Each count is checked
in the database. Ends with one JSON line:
{"array_tasks_per_s", "array_tasks_per_s_templated", "tasks"}.

    python benchmarks/array_submit.py [--tasks 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_submit import (  # noqa: E402
    ADMIN,
    SPEC,
    bench_user,
    count_jobs,
    fresh_database,
    start_server,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TEMPLATED = {
    **SPEC,
    "name": "sweep-${SAM_ARRAY_TASK_ID}",
    "train": {"seed": "${SAM_ARRAY_TASK_ID}"},
}


def submit_array(base: str, token: str, spec: dict, tasks: int) -> float:  # type: ignore[type-arg]
    """Seconds for one request creating `tasks` tasks (201 required)."""
    body = {"spec": {**spec, "array": f"0-{tasks - 1}"}, "files": {}}
    started = time.perf_counter()
    r = httpx.post(
        f"{base}/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=600
    )
    took = time.perf_counter() - started
    if r.status_code != 201:
        raise SystemExit(f"array submit answered {r.status_code}: {r.text[:500]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    url = fresh_database()
    data_dir = tempfile.mkdtemp(prefix="sam-bench-")
    port = free_port()
    server = start_server(url, port, 1, data_dir)
    base = f"http://127.0.0.1:{port}"
    try:
        token = bench_user(base, ADMIN)
        submit_array(base, token, SPEC, 100)  # warm-up: imports, connections, caches
        plain = [submit_array(base, token, SPEC, args.tasks) for _ in range(args.repeat)]
        templated = [submit_array(base, token, TEMPLATED, args.tasks) for _ in range(args.repeat)]
        expected = 100 + 2 * args.repeat * args.tasks
        if count_jobs(url) != expected:
            raise SystemExit(f"expected {expected} jobs in the database, found {count_jobs(url)}")
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)
    best, best_t = min(plain), min(templated)
    print(
        f"{args.tasks} tasks per request: plain {[round(t, 3) for t in plain]} s, "
        f"templated {[round(t, 3) for t in templated]} s"
    )
    print(
        json.dumps(
            {
                "array_tasks_per_s": round(args.tasks / best),
                "array_tasks_per_s_templated": round(args.tasks / best_t),
                "tasks": args.tasks,
            }
        )
    )


if __name__ == "__main__":
    main()
