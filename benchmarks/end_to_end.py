"""Submit-to-running latency on an idle cluster with a cached compile, and jobs per minute
through the whole pipeline (submit -> compile -> place -> train -> succeeded).

Starts the local cluster (`sam up`'s processes; embedded SQLite + filesystem broker by default,
or --postgres/--redis for the real services), warms the compile cache with one job, then
  1. submits --latency-jobs jobs one at a time on the idle cluster and reads each job's
     started_at - created_at (both stamped by SAM), and
  2. submits --batch-jobs jobs at once and times until all have succeeded.
Ends with one JSON line: {"submit_to_running_p50_s", "submit_to_running_p99_s", "jobs_per_min"}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_submit import bench_user  # noqa: E402

SPEC = {
    "name": "e2e",
    "model": {"builtin": "mlp", "kwargs": {"hidden": 64}},
    "data": {"batch_size": 16},
    "run_options": {"steps_per_epoch": 5, "checkpoint_enabled": False},
    "resources": {"region": {"rows": 16, "cols": 16}, "time_limit": "5m"},
}


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def wait_state(
    base: str, headers: dict, job_id: str, states: set[str], timeout: float = 300
) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{base}/api/v1/jobs/{job_id}", headers=headers).json()
        if job["state"] in states:
            return job
        time.sleep(0.02)
    raise TimeoutError(f"job {job_id} did not reach {states}")


def submit(base: str, headers: dict, name: str) -> str:  # type: ignore[type-arg]
    r = httpx.post(
        f"{base}/api/v1/jobs", json={"spec": SPEC | {"name": name}, "files": {}}, headers=headers
    )
    r.raise_for_status()
    return r.json()["id"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-jobs", type=int, default=30)
    parser.add_argument("--batch-jobs", type=int, default=40)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL instead of SQLite")
    parser.add_argument("--redis", default=None, help="a Redis URL instead of the embedded broker")
    parser.add_argument("--port", type=int, default=18766)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster_file = Path(tmp) / "cluster.yaml"
        cluster_file.write_text(
            "wafers:\n  - {id: wse-0, arch: wse2}\n  - {id: wse-1, arch: wse2}\ncompile_servers: 1\n"
        )
        os.environ.update(
            SAM_DATA_DIR=str(Path(tmp) / "data"),
            SAM_CLUSTER=str(cluster_file),
            SAM_ADMIN_TOKEN="sam_admin_e2e",
            SAM_LOG_LEVEL="WARNING",
        )
        if args.postgres:
            os.environ["SAM_DATABASE_URL"] = args.postgres
        if args.redis:
            os.environ["SAM_BROKER_URL"] = args.redis
        run(args)


def run(args: argparse.Namespace) -> None:
    from sam_server.config import Settings
    from sam_worker.supervisor import Cluster

    cluster = Cluster(Settings(), port=args.port)
    cluster.start()
    try:
        cluster.wait_ready(120)
        base = cluster.url
        token = bench_user(base, "sam_admin_e2e")
        user = {"Authorization": f"Bearer {token}"}
        warm = submit(base, user, "warm")
        assert wait_state(base, user, warm, {"succeeded", "failed"}, 600)["state"] == "succeeded"
        latencies = []
        for i in range(args.latency_jobs):
            job_id = submit(base, user, f"lat-{i}")
            job = wait_state(base, user, job_id, {"succeeded", "failed"})
            latencies.append(_ts(job["started_at"]) - _ts(job["created_at"]))
        t0 = time.perf_counter()
        ids = [submit(base, user, f"batch-{i}") for i in range(args.batch_jobs)]
        for job_id in ids:
            wait_state(base, user, job_id, {"succeeded", "failed"}, 900)
        elapsed = time.perf_counter() - t0
    finally:
        cluster.stop()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    per_min = args.batch_jobs / elapsed * 60
    print(
        f"submit->running p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms over {len(latencies)} jobs; "
        f"{args.batch_jobs} jobs through the pipeline in {elapsed:.1f}s = {per_min:.0f} jobs/min",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "submit_to_running_p50_s": round(p50, 4),
                "submit_to_running_p99_s": round(p99, 4),
                "jobs_per_min": round(per_min, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
