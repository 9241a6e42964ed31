"""/docs in a real browser (Debian's chromium driven by Playwright, nothing downloaded): the page
renders from this server alone, and "Authorize" + "Try it out" + "Execute" makes an
authorized call."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.helpers import make_tenant, make_user


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite: the page and the whoami call do the same on PostgreSQL."""
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.fixture
def browser() -> Any:
    from playwright.sync_api import sync_playwright  # the dev extra installs it

    path = shutil.which("chromium")
    if path is None:
        pytest.fail("no chromium executable: apt-get install -y chromium (.ci/run does)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


def test_try_it_out_on_the_offline_docs_page_sends_the_token(live_server, browser) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=live_server.url) as client:
        make_tenant(client, "physics")
        token = make_user(client, "physics", "alice")["Authorization"].split()[1]
    page = browser.new_page()
    requests: list[Any] = []
    page.on("request", lambda request: requests.append(request))
    page.goto(live_server.url + "/docs")
    whoami = '.opblock-summary-path[data-path="/api/v1/whoami"]'
    page.wait_for_selector(whoami, timeout=30_000)  # the UI rendered the document

    page.click("button.authorize")
    page.fill(".modal-ux input", token)
    page.click(".modal-ux button.authorize")
    page.click(".modal-ux button.btn-done")

    operation = page.locator(".opblock", has=page.locator(whoami))
    operation.locator(".opblock-summary").first.click()
    operation.locator("button.try-out__btn").click()
    operation.locator("button.execute").click()
    status = operation.locator(".live-responses-table tr.response .response-col_status").first
    status.wait_for(timeout=30_000)
    assert status.inner_text().strip().startswith("200")
    body = operation.locator(
        ".live-responses-table tr.response .response-col_description"
    ).first.inner_text()
    assert '"alice"' in body and '"physics"' in body

    calls = [r for r in requests if urlsplit(r.url).path == "/api/v1/whoami"]
    assert calls and calls[-1].headers.get("authorization") == f"Bearer {token}"
    host = urlsplit(live_server.url).netloc
    elsewhere = {r.url for r in requests if urlsplit(r.url).netloc != host}
    assert not elsewhere, f"the docs page loaded from other hosts: {elsewhere}"
