"""Open dashboards against the API: `GET /api/v1/jobs` latency with 0, 200 and 1,000 open
`/api/v1/events` streams (each open dashboard page holds one) on one `sam server` process.

- list_p50_ms_N / list_p99_ms_N: sequential `GET /api/v1/jobs` (50 jobs listed) with N streams
  open, while one job runs and its progress moves every 0.2 s (so every tick has news for every
  stream);
- polls_per_s_N: the database polls the events streams cost (`sam_event_polls_total`);
- server_cpu_ms_per_s_N: the server process's CPU per second of wall time while only the
  streams are open (no list calls).

Runs `sam server` alone on SQLite. `--server-src DIR` runs the server from another checkout
(e.g. a worktree of the commit before the hub) for a same-machine comparison.
Usage: `python benchmarks/events.py [--streams 200,1000] [--rounds 60] [--server-src DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from sqlalchemy import update  # noqa: E402
from sqlalchemy.exc import OperationalError  # noqa: E402

from sam_server.db.models import Job  # noqa: E402
from sam_server.db.session import session_scope  # noqa: E402
from tests.api.helpers import ADMIN, MODEL_PY, spec  # noqa: E402
from tests.e2e.event_streams import EventStreams, list_latencies, p50, p99  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def polls(url: str) -> float | None:
    text = httpx.get(url + "/metrics", timeout=60).text
    found = re.search(r"^sam_event_polls_total ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else None  # absent before the hub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="200,1000", help="comma-separated stream counts")
    parser.add_argument("--rounds", type=int, default=60, help="list calls per measurement")
    parser.add_argument("--server-src", help="run the server from this checkout instead")
    parser.add_argument("--cap-s", type=float, default=60, help="a list call's longest wait")
    args = parser.parse_args()
    counts = [int(n) for n in args.streams.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/sam.db"
        env = {"PYTHONPATH": args.server_src} if args.server_src else {}
        server = ServerProcess(url, Path(tmp) / "data", **env).start()
        assert server.proc is not None
        pid = server.proc.pid
        stop = threading.Event()
        opened: list[EventStreams] = []
        try:
            base = server.url + "/api/v1"
            httpx.post(f"{base}/tenants", json={"name": "bench"}, headers=ADMIN).raise_for_status()
            made = httpx.post(f"{base}/tenants/bench/users", json={"name": "u"}, headers=ADMIN)
            auth = {"Authorization": f"Bearer {made.json()['token']}"}
            with httpx.Client(base_url=server.url, timeout=60) as client:
                ids = [
                    client.post(
                        "/api/v1/jobs",
                        json={"spec": spec(), "files": {"model.py": MODEL_PY}},
                        headers=auth,
                    ).json()["id"]
                    for _ in range(50)
                ]
            with session_scope(url) as s:  # one job runs; its progress moves below
                s.execute(update(Job).where(Job.id == ids[0]).values(state="running"))

            def move() -> None:
                step = 0
                while not stop.wait(0.2):
                    step += 1
                    try:
                        with session_scope(url) as s:
                            s.execute(
                                update(Job).where(Job.id == ids[0]).values(progress_step=step)
                            )
                    except OperationalError:  # SQLite busy under many readers: next time
                        continue

            threading.Thread(target=move, daemon=True).start()
            list_latencies(server.url, auth, 10)  # warm up
            out: dict[str, float] = {}
            load = [os.getloadavg()[0]]

            def measure(label: str) -> None:
                samples = list_latencies(server.url, auth, args.rounds, cap_s=args.cap_s)
                out[f"list_p50_ms_{label}"] = round(p50(samples) * 1000, 1)
                out[f"list_p99_ms_{label}"] = round(p99(samples) * 1000, 1)
                before_polls, before_cpu = polls(server.url), cpu_s(pid)
                began = time.monotonic()
                time.sleep(5)
                wall = time.monotonic() - began
                cpu = cpu_s(pid) - before_cpu
                after_polls = polls(server.url)
                if after_polls is not None and before_polls is not None:
                    out[f"polls_per_s_{label}"] = round((after_polls - before_polls) / wall, 2)
                out[f"server_cpu_ms_per_s_{label}"] = round(cpu / wall * 1000, 1)
                load.append(os.getloadavg()[0])
                print(label, {k: v for k, v in out.items() if k.endswith(label)}, file=sys.stderr)

            measure("no_streams")
            for n in counts:
                more = n - sum(s.n for s in opened)
                if more > 0:
                    opened.append(EventStreams(server.url, auth, more).start(timeout_s=600))
                measure(f"{n}_streams")
            out["load_avg"] = round(sum(load) / len(load), 2)
        finally:
            stop.set()
            for streams in opened:
                streams.stop()
            server.kill()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
