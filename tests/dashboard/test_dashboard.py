"""The dashboard in a real browser against a real `sam up`: what a user sees and does."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

from tests.dashboard.live_cluster import LiveCluster, mlp_spec, sign_in

pytestmark = pytest.mark.slow

ACTIVE = {"queued", "compiling", "pending", "running", "cancelling"}


def _points(page, selector: str) -> int:
    return int(page.get_attribute(selector, "data-points") or 0)


def _wait_points(page, selector: str, above: int, timeout_s: float = 30) -> int:
    """Wait until the chart has drawn more than `above` points (polled from here: the page's
    CSP forbids the eval that `wait_for_function` needs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (n := _points(page, selector)) > above:
            return n
        page.wait_for_timeout(200)
    raise AssertionError(f"{selector} stayed at {_points(page, selector)} points")


def test_sign_in_refuses_a_bad_token_and_keeps_a_good_one_for_the_tab(page, cluster: LiveCluster):
    page.goto(cluster.url + "/")
    page.fill("#token", "sam_not_a_token")
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#signin-error:has-text('not valid')")
    sign_in(page, cluster.url, cluster.tokens["physics"])
    assert "alice @ physics" in page.inner_text("#who")
    page.reload()  # the token lives in this tab's session: still signed in
    page.wait_for_selector("#nav:not([hidden])")
    assert page.evaluate("sessionStorage.getItem('sam-token')") == cluster.tokens["physics"]
    assert page.evaluate("localStorage.length") == 0
    page.click("#signout")
    page.wait_for_selector("#signin")
    assert page.evaluate("sessionStorage.getItem('sam-token')") is None


def test_a_job_is_followed_live_from_queue_to_cancel(page, cluster: LiveCluster):
    alice, bob = cluster.tokens["physics"], cluster.tokens["bio"]
    sign_in(page, cluster.url, alice)
    page.wait_for_selector("#queue-table")

    # Submitted through the API (not the page): it appears in the open queue by itself.
    mine = cluster.submit(alice, mlp_spec("alice-long", steps=20_000))
    theirs = cluster.submit(bob, mlp_spec("bob-long", steps=20_000, rows=16, cols=16))
    page.wait_for_selector(f"#queue-rows tr[data-job='{mine}']", timeout=30_000)
    assert page.query_selector(f"#queue-rows tr[data-job='{theirs}']") is None

    # Its page: the loss curve grows while it runs, step by step, from the metrics stream.
    cluster.wait_for(alice, mine, lambda j: j["state"] == "running" and j["progress"]["step"] > 0)
    cluster.wait_for(bob, theirs, lambda j: j["state"] == "running")
    page.click(f"#queue-rows tr[data-job='{mine}'] a")
    page.wait_for_selector("#job-state:has-text('running')")
    first = _wait_points(page, "#loss-chart", 0)
    _wait_points(page, "#loss-chart", first + 20)
    assert _points(page, "#rate-chart") > first  # samples/s is drawn alongside
    assert "running" in page.inner_text("#timeline")
    assert page.inner_text("#log").strip()  # the log tail

    # The wafer map shows its region where the API says it is, and bob's only as a tenant-less
    # region without its id.
    region = cluster.get(f"/api/v1/jobs/{mine}", alice)["region"]
    page.click("#nav a[data-page=cluster]")
    card = f".wafer-card[data-wafer='{region['wafer']}']"
    page.wait_for_selector(f"{card} li[data-job='{mine}']")
    legend = page.inner_text(f"{card} li[data-job='{mine}']")
    assert f"{region['rows']}×{region['cols']} at ({region['row']}, {region['col']})" in legend
    assert theirs not in page.content()
    assert "bio" not in page.inner_text("#wafers")
    assert page.locator("li:has-text('another tenant')").count() == 1

    # Cancel from the page ends it.
    page.goto(f"{cluster.url}/#/jobs/{mine}")
    page.wait_for_selector("#cancel")
    page.click("#cancel")
    job = cluster.wait_for(alice, mine, lambda j: j["state"] == "cancelled", timeout_s=60)
    assert job["error"] is None or job["error"]["kind"] != "internal"
    page.wait_for_selector("#job-state:has-text('cancelled')", timeout=15_000)
    assert page.query_selector("#cancel") is None

    # bob's job was never on any page alice opened, nor in any answer her browser received.
    page.goto(f"{cluster.url}/#/queue?state=all")
    page.wait_for_selector(f"#queue-rows tr[data-job='{mine}']")
    assert theirs not in page.content()
    assert page.query_selector("#filter-tenant") is None  # a user cannot pick a tenant
    page.goto(f"{cluster.url}/#/jobs/{theirs}")
    page.wait_for_selector("main .error")
    assert "no job" in page.inner_text("main").lower()
    cluster.request("POST", f"/api/v1/jobs/{theirs}/cancel", bob).raise_for_status()


def test_the_admin_sees_every_tenant_and_can_filter(page, cluster: LiveCluster):
    alice, bob = cluster.tokens["physics"], cluster.tokens["bio"]
    a = cluster.submit(alice, {**mlp_spec("alice-low", steps=5), "priority": "low"})
    b = cluster.submit(bob, mlp_spec("bob-short", steps=5))
    sign_in(page, cluster.url, cluster.admin_token)
    page.goto(f"{cluster.url}/#/queue?state=all")
    page.wait_for_selector(f"#queue-rows tr[data-job='{a}']")
    page.wait_for_selector(f"#queue-rows tr[data-job='{b}']")
    page.select_option("#filter-tenant", "bio")
    page.wait_for_selector(f"#queue-rows tr[data-job='{a}']", state="detached")
    page.wait_for_selector(f"#queue-rows tr[data-job='{b}']")  # the page is drawn anew
    assert page.query_selector(f"#queue-rows tr[data-job='{a}']") is None
    tenants = {
        row.get_attribute("data-tenant") for row in page.query_selector_all("#queue-rows tr")
    }
    assert tenants == {"bio"}
    page.goto(f"{cluster.url}/#/queue?state=all&priority=low")
    page.wait_for_selector(f"#queue-rows tr[data-job='{a}']")
    assert page.query_selector(f"#queue-rows tr[data-job='{b}']") is None
    page.click("#nav a[data-page=tenants]")
    page.wait_for_selector("#tenant-table tr[data-tenant='bio']")
    assert page.query_selector("#tenant-table tr[data-tenant='physics']") is not None
    assert "alice" in page.inner_text("#user-table")
    assert page.query_selector("#token-table") is not None


def test_a_waiting_job_shows_its_reasons_position_and_eta(page, cluster: LiveCluster):
    alice = cluster.tokens["physics"]
    # Bigger than any free rectangle while two 64x64 blockers run: it waits with reasons.
    blockers = [
        cluster.submit(alice, mlp_spec(f"block-{i}", steps=20_000, rows=64, cols=64))
        for i in range(2)
    ]
    waiting = cluster.submit(alice, mlp_spec("waits", steps=5, rows=64, cols=64))
    try:
        for job in blockers:
            cluster.wait_for(alice, job, lambda j: j["state"] == "running")
        cluster.wait_for(alice, waiting, lambda j: j["state"] == "pending")
        sign_in(page, cluster.url, alice)
        row = f"#queue-rows tr[data-job='{waiting}']"
        page.wait_for_selector(row)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            cells = page.query_selector_all(f"{row} td")
            if cells[6].inner_text().strip() and cells[9].inner_text().strip():
                break
            page.wait_for_timeout(500)
        explain = cluster.get(f"/api/v1/jobs/{waiting}/explain", alice)
        cells = [c.inner_text() for c in page.query_selector_all(f"{row} td")]
        assert cells[6].strip() == str(explain["position"])
        assert all(r["code"] in cells[9] for r in explain["reasons"])
        page.click(f"{row} a")
        page.wait_for_selector("#explain li")
        assert explain["reasons"][0]["message"] in page.inner_text("#explain")
    finally:
        for job in [*blockers, waiting]:
            cluster.request("POST", f"/api/v1/jobs/{job}/cancel", alice)


def test_no_page_load_asks_any_other_host(page, cluster: LiveCluster):
    alice = cluster.tokens["physics"]
    done = cluster.submit(alice, mlp_spec("finished", steps=5))
    cluster.wait_for(alice, done, lambda j: j["state"] not in ACTIVE)
    sign_in(page, cluster.url, alice)
    pages = {
        "#/queue?state=all": "#queue-rows tr",
        "#/cluster": ".wafer-card canvas",
        "#/tenants": "#tenant-table tr[data-tenant='physics']",
        f"#/jobs/{done}": "#heatmap-utilization",  # the report's images came too
    }
    for hash_, ready in pages.items():
        page.goto(f"{cluster.url}/{hash_}")
        page.wait_for_selector(ready)
        page.wait_for_timeout(500)
    hosts = {
        urlsplit(url).netloc for url in page.requested if not url.startswith(("blob:", "data:"))
    }
    assert hosts == {f"127.0.0.1:{cluster.port}"}, hosts
    csp = page.request.get(cluster.url + "/").headers["content-security-policy"]
    assert "default-src 'self'" in csp and "connect-src 'self'" in csp


def test_a_runner_jobs_page_names_its_script(page, cluster: LiveCluster):
    alice = cluster.tokens["physics"]
    spec = {"name": "seed", "entry": {"script": "train.py", "args": ["--lr", "0.1"]}}
    spec["data"] = {"batch_size": 4}
    body = {"spec": spec, "files": {"train.py": "from sam import Runner\n"}}
    made = cluster.request("POST", "/api/v1/jobs", alice, json=body)
    made.raise_for_status()
    job_id = made.json()["id"]
    sign_in(page, cluster.url, alice)
    page.goto(f"{cluster.url}/#/jobs/{job_id}")
    page.wait_for_selector("dl.facts dt:has-text('Script')")
    assert "train.py --lr 0.1" in page.inner_text("dl.facts")
