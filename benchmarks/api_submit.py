"""Sustained job submissions per second through HTTP, with PostgreSQL, several concurrent clients.

Starts `sam server` (uvicorn, --workers W) on a fresh PostgreSQL database, creates a tenant and a
user, then C concurrent clients submit jobs for D seconds over keep-alive connections.
The load comes from `wrk` when it is installed (a C load generator: nearly all of the two cores
go to SAM and PostgreSQL) or else from Python asyncio clients on raw keep-alive connections
(`--load python`), which cost a few microseconds per request. Every submit must be answered 201.
Prints p50/p99 submit latency and ends with one JSON line: {"submits_per_s", "p50_ms", "p99_ms"}.

    python benchmarks/api_submit.py [--clients 16] [--seconds 10] [--workers 2] [--load wrk|python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx
from sqlalchemy import create_engine, text

PG = os.environ.get("SAM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
ADMIN = "sam_admin_bench"
SPEC = {
    "name": "bench",
    "model": {"builtin": "mlp"},
    "resources": {"region": {"rows": 8, "cols": 8}, "time_limit": "10m"},
}


def fresh_database() -> str:
    name = f"sam_bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(
        PG.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return PG.rsplit("/", 1)[0] + "/" + name


def count_jobs(url: str) -> int:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM jobs")).scalar_one())
    finally:
        engine.dispose()


def bench_user(base: str, admin_token: str) -> str:
    """Make tenant `bench` with user `u` on the server at `base`; the user's API token."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    httpx.post(f"{base}/api/v1/tenants", json={"name": "bench"}, headers=admin).raise_for_status()
    made = httpx.post(f"{base}/api/v1/tenants/bench/users", json={"name": "u"}, headers=admin)
    made.raise_for_status()
    return str(made.json()["token"])


def start_server(url: str | None, port: int, workers: int, data_dir: str) -> subprocess.Popen:  # type: ignore[type-arg]
    """`sam server` on `url` (migrated first), or with `url` None on the embedded SQLite under
    `data_dir` (the server creates that itself); returns once /readyz answers 200."""
    env = dict(
        os.environ,
        SAM_ADMIN_TOKEN=ADMIN,
        SAM_DATA_DIR=data_dir,
        SAM_LOG_LEVEL="WARNING",
    )
    env.pop("SAM_DATABASE_URL", None)
    sam = [sys.executable, "-c", "import sys; from client.cli import main; main(sys.argv[1:])"]
    if url is not None:
        env["SAM_DATABASE_URL"] = url
        subprocess.run([*sam, "db", "upgrade"], env=env, check=True, capture_output=True)
    proc = subprocess.Popen(
        [*sam, "server", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


async def client_loop(base: str, token: str, until: float, latencies: list[float]) -> None:
    """One keep-alive HTTP/1.1 connection submitting back to back.

    Written on asyncio streams rather than an HTTP library so that the load generator, which
    shares the two cores with the server, costs a few microseconds per request, not the
    server's own order of CPU (an httpx client took a quarter of the machine).
    """
    host, port = base.removeprefix("http://").split(":")
    body = json.dumps({"spec": SPEC, "files": {}}).encode()
    request = (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            answer = await reader.readexactly(length)
            if status != 201:
                raise RuntimeError(f"submit failed: {status} {answer.decode(errors='replace')}")
            latencies.append(time.perf_counter() - t0)
    finally:
        writer.close()


async def load(base: str, token: str, clients: int, seconds: float) -> tuple[float, list[float]]:
    """(elapsed s, per-submit latencies) for C clients submitting for the given seconds."""
    latencies: list[float] = []
    start = time.perf_counter()
    until = start + seconds
    await asyncio.gather(*(client_loop(base, token, until, latencies) for _ in range(clients)))
    return time.perf_counter() - start, latencies


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.status + e.connect + e.read + e.write + e.timeout))
end
"""


def wrk_load(
    base: str, token: str, clients: int, seconds: float
) -> tuple[int, float, float, float]:
    """(submits, submits/s, p50 ms, p99 ms) measured by wrk; raises if any submit failed."""
    body = json.dumps({"spec": SPEC, "files": {}})
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % (body, token))
    out = subprocess.run(
        [
            "wrk",
            "-t",
            "2",
            "-c",
            str(clients),
            "-d",
            f"{int(seconds)}s",
            "-s",
            f.name,
            f"{base}/api/v1/jobs",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    fields = next(line for line in out.splitlines() if line.startswith("RESULT")).split()[1:]
    requests, duration_us, p50_us, p99_us, bad = (int(x) for x in fields)
    if bad:
        raise RuntimeError(f"{bad} submits failed (non-2xx, socket error or timeout):\n{out}")
    return requests, requests / (duration_us / 1e6), p50_us / 1000, p99_us / 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument(
        "--load", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python"
    )
    args = parser.parse_args()
    url = fresh_database()
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start_server(url, args.port, args.workers, data_dir)
        try:
            base = f"http://127.0.0.1:{args.port}"
            token = bench_user(base, ADMIN)
            _, warm = asyncio.run(load(base, token, args.clients, 1.0))  # warm-up
            if args.load == "wrk":
                done, rate, p50, p99 = wrk_load(base, token, args.clients, args.seconds)
            else:
                elapsed, lat = asyncio.run(load(base, token, args.clients, args.seconds))
                lat.sort()
                p50 = statistics.median(lat) * 1000
                p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
                done, rate = len(lat), len(lat) / elapsed
            stored = count_jobs(url)
            # Every answered submit is a committed row (wrk may also have requests in flight
            # when it stops, which the server still commits).
            if stored < len(warm) + done:
                raise RuntimeError(f"{len(warm) + done} submits answered, {stored} jobs stored")
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"{args.load} load, {args.clients} clients, {args.workers} server workers, PostgreSQL: "
        f"{rate:.0f} submits/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "submits_per_s": round(rate, 1),
                "p50_ms": round(p50, 2),
                "p99_ms": round(p99, 2),
                "clients": args.clients,
                "server_workers": args.workers,
                "load": args.load,
            }
        )
    )


if __name__ == "__main__":
    main()
