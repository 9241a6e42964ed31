"""The web dashboard in a real browser (the system's Chromium, driven by Playwright).

- first_paint_ms: the browser's first contentful paint of the signed-in dashboard at `/`.
- queue_page_ms_10k_jobs: navigation start to the queue table drawn, with 10,000 jobs in the
  database (half of them waiting, so `/queue` has reasons, positions and ETAs for 5,000); the
  median of 5 loads.
- sse_update_ms: a step written to job_metrics (as a wafer worker's `record_steps` writes it) to
  that step shown on an open job page, through the metrics SSE stream; the median of 20 steps.

Runs `sam server` alone (no scheduler, no workers) on SQLite so that nothing else moves the
10,000 jobs while they are measured. Usage: `python benchmarks/dashboard.py [--jobs N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import insert, select, update  # noqa: E402

from sam_server.db.models import Job, JobMetric  # noqa: E402
from sam_server.db.session import session_scope  # noqa: E402
from sam_server.db.types import utcnow  # noqa: E402
from tests.conftest import ADMIN_TOKEN  # noqa: E402
from tests.dashboard.live_cluster import launch_browser, mlp_spec  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402


def seed(url: str, template_id: str, jobs: int) -> None:
    """Clone the template `jobs - 1` times: half waiting with a planned position and reasons,
    the rest ended; the template itself runs (the job page's subject)."""
    now = utcnow()
    with session_scope(url) as s:
        row = {c.name: getattr(s.get(Job, template_id), c.key) for c in Job.__table__.columns}
        s.execute(
            update(Job)
            .where(Job.id == template_id)
            .values(state="running", wafer_id="wse-0", region_row=0, region_col=0)
            .values(region_rows=8, region_cols=8, started_at=now, attempts=1)
        )
    batch = []
    for i in range(jobs - 1):
        clone = row | {"id": uuid.uuid4().hex[:24], "seq": row["seq"] + 1 + i}
        clone |= {"idempotency_key": None, "name": f"bench-{i}"}
        if i % 2 == 0:
            clone |= {"state": "pending", "reason": "Resources"}
            clone |= {
                "explain": {
                    "position": i // 2 + 1,
                    "reasons": [{"code": "Resources", "message": "no free 8x8 rectangle"}],
                    "eta": None,
                    "priority": {"total": 1.0, "factors": {"fairshare": 0.5}, "weighted": {}},
                }
            }
        else:
            clone |= {"state": "succeeded", "finished_at": now}
        batch.append(clone)
    for start in range(0, len(batch), 2000):
        with session_scope(url) as s:
            s.execute(insert(Job), batch[start : start + 2000])


def record_step(url: str, job_id: str, step: int) -> float:
    """Write one step as the wafer worker does; the wall time of its commit."""
    with session_scope(url) as s:
        s.execute(
            insert(JobMetric).values(
                job_id=job_id,
                step=step,
                loss=2.3 - step * 0.001,
                sim_cycles=1000,
                samples_per_sec=1.0e6,
                attempt=1,
            )
        )
        s.execute(update(Job).where(Job.id == job_id).values(progress_step=step + 1))
    return time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/sam.db"
        server = ServerProcess(url, Path(tmp) / "data").start()
        try:
            import httpx

            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            base = server.url + "/api/v1"
            httpx.post(f"{base}/tenants", json={"name": "bench"}, headers=admin).raise_for_status()
            made = httpx.post(f"{base}/tenants/bench/users", json={"name": "u"}, headers=admin)
            token = made.json()["token"]
            auth = {"Authorization": f"Bearer {token}"}
            body = {"spec": mlp_spec("bench-live", steps=100_000), "files": {}}
            job_id = httpx.post(f"{base}/jobs", json=body, headers=auth).json()["id"]
            seed(url, job_id, args.jobs)
            with session_scope(url) as s:
                total = len(s.execute(select(Job.id)).all())
            print(f"{total} jobs in the database", file=sys.stderr)

            with sync_playwright() as playwright:
                browser = launch_browser(playwright)
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(f"sessionStorage.setItem('sam-token', {json.dumps(token)})")
                page = context.new_page()
                page.goto(server.url + "/")  # warm: the server's first requests, the browser
                page.wait_for_selector("#queue-rows tr")
                paints, queue_ms = [], []
                for _ in range(5):
                    page.goto("about:blank")
                    page.goto(server.url + "/#/queue")
                    page.wait_for_selector("#queue-summary[data-rendered-ms]")
                    queue_ms.append(float(page.get_attribute("#queue-summary", "data-rendered-ms")))
                    fcp = page.evaluate(
                        "performance.getEntriesByName('first-contentful-paint')[0]?.startTime"
                    )
                    paints.append(float(fcp))
                rows = page.locator("#queue-rows tr").count()
                print(f"queue page: {rows} rows drawn, {queue_ms} ms", file=sys.stderr)

                page.goto(f"{server.url}/#/jobs/{job_id}")
                page.wait_for_selector("#step-info")
                page.wait_for_timeout(1500)  # the metrics stream is open
                delays = []
                for step in range(20):
                    written = record_step(url, job_id, step)
                    # a selector, not wait_for_function: the page's CSP forbids eval
                    page.wait_for_selector(f"#step-info[data-last-step='{step}']", timeout=10_000)
                    delays.append((time.perf_counter() - written) * 1000)
                    page.wait_for_timeout(137)  # not in step with the server's poll
                browser.close()
        finally:
            server.terminate()
    figures = {
        "first_paint_ms": round(statistics.median(paints), 1),
        "queue_page_ms_10k_jobs": round(statistics.median(queue_ms), 1),
        "sse_update_ms": round(statistics.median(delays), 1),
        "sse_update_max_ms": round(max(delays), 1),
        "jobs": total,
        "load_avg_1m": round(os.getloadavg()[0], 1),  # the machine is shared: read figures with it
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
