"""Refresh the dashboard's screenshots in docs/screenshots/ from a real `sam up`.

Starts a small cluster (two 64x64 wafers, SQLite, the embedded broker), makes two tenants,
runs a short job to the end (for its report), starts a long job per tenant and queues one
that must wait, then photographs each page with the system's Chromium. Usage:
`python scripts/screenshots.py [--out docs/screenshots]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.dashboard.live_cluster import LiveCluster, launch_browser, mlp_spec  # noqa: E402

ACTIVE = {"queued", "compiling", "pending", "running", "cancelling"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        cluster = LiveCluster(Path(tmp)).start()
        jobs: list[tuple[str, str]] = []
        try:
            alice = cluster.add_tenant("physics", "alice")
            bob = cluster.add_tenant("bio", "bob")
            done = cluster.submit(alice, mlp_spec("mlp-finished", steps=60, rows=16, cols=16))
            cluster.wait_for(alice, done, lambda j: j["state"] not in ACTIVE)
            live = cluster.submit(alice, mlp_spec("mlp-long", steps=50_000, rows=48, cols=48))
            jobs += [(alice, live)]
            jobs += [(bob, cluster.submit(bob, mlp_spec("bob-a", steps=50_000, rows=32)))]
            jobs += [(bob, cluster.submit(bob, mlp_spec("bob-b", steps=50_000, rows=40, cols=40)))]
            for token, job in jobs:
                cluster.wait_for(token, job, lambda j: j["state"] == "running")
            jobs += [
                (alice, cluster.submit(alice, mlp_spec("too-big-now", steps=5, rows=64, cols=64)))
            ]
            jobs += [
                (
                    bob,
                    cluster.submit(
                        bob, {**mlp_spec("low-prio", steps=5, rows=48, cols=48), "priority": "low"}
                    ),
                )
            ]
            cluster.wait_for(alice, jobs[-2][1], lambda j: j["state"] == "pending")
            with sync_playwright() as playwright:
                browser = launch_browser(playwright)
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                token = cluster.admin_token
                context.add_init_script(f"sessionStorage.setItem('sam-token', '{token}')")
                page = context.new_page()
                shots = {
                    "queue": ("#/queue", "#queue-rows tr"),
                    "cluster": ("#/cluster", ".wafer-card canvas"),
                    "tenants": ("#/tenants", "#tenant-table tbody tr"),
                    "job-running": (f"#/jobs/{live}", "#loss-chart[data-points]"),
                    "job-report": (f"#/jobs/{done}", "#heatmap-utilization"),
                }
                for name, (hash_, ready) in shots.items():
                    page.goto(f"{cluster.url}/{hash_}")
                    page.wait_for_selector(ready)
                    page.wait_for_timeout(3000)  # a few live updates
                    page.screenshot(path=str(args.out / f"{name}.png"), full_page=True)
                    print(f"wrote {args.out / name}.png", file=sys.stderr)
                signin = browser.new_context(viewport={"width": 1280, "height": 500}).new_page()
                signin.goto(cluster.url + "/")
                signin.wait_for_selector("#signin")
                signin.screenshot(path=str(args.out / "sign-in.png"))
                browser.close()
        finally:
            for token, job in jobs:
                cluster.request("POST", f"/api/v1/jobs/{job}/cancel", token)
            cluster.stop()


if __name__ == "__main__":
    main()
