"""Operate at scale: 100 wafers, 100,000 queued jobs, 1,000 running, 1,000 idle log followers.

Usage: python benchmarks/scale.py [--jobs N] [--running N] [--wafers N] [--followers N]
                                  [--db postgres|sqlite] [--rounds N]

The API (`sam server`, a real process), the database (PostgreSQL by default: a fresh database on
127.0.0.1:5432) and the scheduler's planning cycle (`run_cycle`, policy in the loop, on that
database) are the real ones. The workers are synthetic: wafer rows that heartbeat and running
jobs written straight into the database (1,000 real wafer workers cannot run on 2 cores); the
first template job goes through the API, its clones are bulk-inserted. Ends with one JSON line
{"followers", "other_calls_p99_ms", "list_p99_ms", "cycle_s", "db_bytes_per_1k_steps",
"metrics_last3_bytes", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, insert, select, text, update

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sam_server.config import Settings  # noqa: E402
from sam_server.controller.loop import run_cycle  # noqa: E402
from sam_server.db.models import Job, Wafer  # noqa: E402
from sam_server.db.session import session_scope, upgrade_database  # noqa: E402
from sam_server.db.types import utcnow  # noqa: E402
from sam_server.services import lifecycle  # noqa: E402
from tests.api.helpers import make_tenant, make_user, spec, submit  # noqa: E402
from tests.conftest import create_pg_database, drop_pg_database  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402
from tests.e2e.test_follow_scale import Followers, _p99  # noqa: E402
from wse_sim.arch import WSE2  # noqa: E402

ROWS, COLS = WSE2.rows, WSE2.cols  # a full WSE-2 fabric


def seed(url: str, template_id: str, jobs: int, running: int, wafers: int) -> list[str]:
    """Clone the template job `jobs - 1` times; the first `running` clones run, spread over
    the wafers in 64x64 regions. Returns the clone ids, running ones first."""
    now = utcnow()
    with session_scope(url) as s:
        row = {c.name: getattr(s.get(Job, template_id), c.key) for c in Job.__table__.columns}
        known = set(s.execute(select(Wafer.id)).scalars())  # the server registers the file's
        s.execute(update(Wafer).values(state="online", worker="synthetic", heartbeat_at=now))
        missing = [f"wse-{w}" for w in range(wafers) if f"wse-{w}" not in known]
        if missing:
            s.execute(
                insert(Wafer),
                [
                    {"id": w, "arch": "wse2", "rows": ROWS, "cols": COLS, "state": "online"}
                    | {"worker": "synthetic", "heartbeat_at": now}
                    for w in missing
                ],
            )
    ids = [uuid.uuid4().hex[:24] for _ in range(jobs - 1)]
    per_wafer = max(1, -(-running // wafers))
    for start in range(0, len(ids), 5000):
        batch = []
        for i in range(start, min(start + 5000, len(ids))):
            clone = row | {"id": ids[i], "seq": row["seq"] + 1 + i, "idempotency_key": None}
            if i < running:
                w, k = divmod(i, per_wafer)
                clone |= {"state": "running", "wafer_id": f"wse-{w}", "attempts": 1}
                clone |= {"region_row": (k // 11) * 68, "region_col": (k % 11) * 90}
                clone |= {"region_rows": 64, "region_cols": 64, "started_at": now}
                clone |= {"lease_owner": "synthetic", "lease_expires_at": now + timedelta(days=1)}
            batch.append(clone)
        with session_scope(url) as s:
            s.execute(insert(Job), batch)
    if not url.startswith("sqlite"):
        # A bulk load leaves the planner's statistics at "one row" until autovacuum's analyze
        # runs (a minute or more under load): lists then sort every job. Analyze, as after any
        # bulk load; jobs that arrive one by one keep autovacuum's statistics current.
        engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE jobs"))
        engine.dispose()
    return ids


def heartbeat(url: str, stop: threading.Event) -> None:
    """The synthetic wafer workers: every wafer stays online."""
    while not stop.wait(2.0):
        with session_scope(url) as s:
            s.execute(update(Wafer).values(heartbeat_at=utcnow()))


def timed(client: httpx.Client, paths: list[str], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        for path in paths:
            began = time.perf_counter()
            assert client.get(path).status_code == 200, path
            samples.append(time.perf_counter() - began)
    return round(_p99(samples) * 1000, 1)


def db_bytes(url: str, tables: tuple[str, ...]) -> int:
    """The bytes the tables hold once compacted: VACUUM (SQLite) or VACUUM FULL (PostgreSQL),
    so rows already packed into chunks and deleted are not counted (autovacuum reuses them)."""
    if url.startswith("sqlite"):
        with session_scope(url) as s:
            s.connection().exec_driver_sql("VACUUM")
        return os.path.getsize(url.removeprefix("sqlite:///"))
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in tables:
            conn.execute(text(f"VACUUM FULL {table}"))
        names = ", ".join(f"'{t}'" for t in tables)
        sql = f"SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relname IN ({names})"
        size = int(conn.execute(text(sql)).scalar() or 0)
    engine.dispose()
    return size


def train_synthetic(url: str, job_id: str, steps: int, settings: Settings) -> None:
    """What a wafer worker writes for `steps` steps: metrics, a log line per log_every_steps."""
    for first in range(0, steps, 50):  # a flush every 50 steps
        batch = [
            {"step": i, "loss": 2.0 / (1 + i), "sim_cycles": 123456, "samples_per_sec": 1.0e4}
            for i in range(first, min(first + 50, steps))
        ]
        lines = [
            ("INFO", f"step {i}: loss {2.0 / (1 + i):.6g}, 123456 cycles, 1e+04 samples/s")
            for i in range(first, first + len(batch))
            if i % settings.worker.log_every_steps == 0
        ]
        with session_scope(url) as s:
            assert lifecycle.record_steps(
                s,
                job_id=job_id,
                owner="synthetic",
                attempt=1,
                steps=batch,
                lines=lines,
                keep_recent=settings.storage.metrics_recent_steps,
                chunk_steps=settings.storage.metrics_chunk_steps,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--running", type=int, default=1_000)
    parser.add_argument("--wafers", type=int, default=100)
    parser.add_argument("--followers", type=int, default=1_000)
    parser.add_argument("--steps", type=int, default=20_000, help="steps of the storage job")
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument(
        "--cycle-only", action="store_true", help="only the planning cycles (no followers/storage)"
    )
    parser.add_argument("--cycles", type=int, default=3, help="planning cycles measured")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sam-scale-"))
    url = create_pg_database() if args.db == "postgres" else f"sqlite:///{tmp / 'sam.db'}"
    upgrade_database(url)
    cluster = tmp / "cluster.yaml"
    wafers = "\n".join(f"  - {{id: wse-{w}, arch: wse2}}" for w in range(args.wafers))
    cluster.write_text(f"compile_servers: 4\nwafers:\n{wafers}\n")
    server = ServerProcess(url, tmp / "data", SAM_CLUSTER=str(cluster))
    settings = Settings(database_url=url, data_dir=tmp / "data", cluster=cluster)
    stop = threading.Event()
    out: dict[str, Any] = {}
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=60) as client:
            make_tenant(client, "scale")
            user = make_user(client, "scale", "bench")
            small = spec(resources={"region": {"rows": 64, "cols": 64}, "time_limit": "1h"})
            template = submit(client, user, small).json()["id"]
        began = time.perf_counter()
        ids = seed(url, template, args.jobs, args.running, args.wafers)
        print(f"seeded {args.jobs} jobs in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        threading.Thread(target=heartbeat, args=(url, stop), daemon=True).start()

        waiting = ids[args.running :]
        if args.cycle_only:
            out |= cycles(settings, args.cycles)
            raise _Done
        others = [f"/api/v1/jobs/{waiting[0]}", "/healthz", "/api/v1/whoami"]
        lists = ["/api/v1/jobs?limit=50", "/api/v1/jobs?state=running&limit=50"]
        with httpx.Client(base_url=server.url, headers=user, timeout=60) as client:
            timed(client, others + lists, 5)  # warm up
            out["other_calls_p99_ms_without_followers"] = timed(client, others, args.rounds)
            out["list_p99_ms_without_followers"] = timed(client, lists, args.rounds // 2)
            followers = MultiFollowers(server.url, user, waiting[: args.followers])
            followers.thread.start()
            followers.wait_connected(timeout_s=600)
            out["followers"] = followers.connected
            out["other_calls_p99_ms"] = timed(client, others, args.rounds)
            out["list_p99_ms"] = timed(client, lists, args.rounds // 2)

            storage_job = ids[0]  # a running job
            tables = ("job_metrics", "job_metric_chunks", "job_logs")
            before = db_bytes(url, tables)
            train_synthetic(url, storage_job, args.steps, settings)
            grown = db_bytes(url, tables) - before
            out["db_bytes_per_1k_steps"] = round(grown * 1000 / args.steps)
            last3 = client.get(f"/api/v1/jobs/{storage_job}/metrics", params={"last": 3})
            out["metrics_last3_bytes"] = len(last3.content)
            print(json.dumps(out), file=sys.stderr)  # the API figures, before the long part
            # Followers stay connected through the cycles, as in a live cluster.
            out |= cycles(settings, args.cycles)
    except _Done:
        pass
    finally:
        out |= {"jobs": args.jobs, "running": args.running, "wafers": args.wafers, "db": args.db}
        stop.set()
        server.kill()
        if args.db == "postgres":
            drop_pg_database(url)
    print(json.dumps(dict(sorted(out.items(), key=lambda kv: kv[0] != "followers"))))


class _Done(Exception):
    """--cycle-only: the API part is skipped."""


def cycles(settings: Settings, n: int) -> dict[str, Any]:
    """`n` planning cycles: the first (the scheduler's row cache cold) and the steady ones after
    it, in wall seconds and in CPU seconds of this process (the machine may be shared)."""
    stats, cpu = [], []
    for _ in range(max(2, n)):
        began = time.process_time()
        stats.append(run_cycle(settings))
        cpu.append(time.process_time() - began)
    print(f"cycles: {[round(c.seconds, 2) for c in stats]} s", file=sys.stderr)
    print(f"cycles: {[round(c, 2) for c in cpu]} s CPU", file=sys.stderr)
    steady = sorted(c.seconds for c in stats[1:])
    steady_cpu = sorted(cpu[1:])
    return {
        "cycle_s": round(steady[len(steady) // 2], 3),  # the median steady cycle
        "cycle_cpu_s": round(steady_cpu[len(steady_cpu) // 2], 3),
        "first_cycle_s": round(stats[0].seconds, 3),
        "cycle_waiting": stats[-1].waiting,
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }


class MultiFollowers(Followers):
    """One idle follower on each of many jobs (the hub polls them all in one query a tick)."""

    def __init__(self, url: str, headers: dict[str, str], job_ids: list[str]) -> None:
        super().__init__(url, headers, "", len(job_ids))
        self.job_ids = job_ids

    async def _main(self) -> None:
        import asyncio

        limits = httpx.Limits(max_connections=self.n + 10)
        timeout = httpx.Timeout(600, read=None)
        async with httpx.AsyncClient(base_url=self.url, limits=limits, timeout=timeout) as client:
            tasks = []
            for job_id in self.job_ids:
                tasks.append(asyncio.create_task(self._follow(client, job_id)))
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, client: httpx.AsyncClient, job_id: str) -> None:
        headers = self.headers | {"Accept": "text/event-stream"}
        async with client.stream("GET", f"/api/v1/jobs/{job_id}/logs", headers=headers) as r:
            async for line in r.aiter_lines():
                if line.startswith("retry:"):
                    self.connected += 1


if __name__ == "__main__":
    main()
