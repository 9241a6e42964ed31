"""Fixtures of the dashboard's browser tests: one real `sam up` for the module, two tenants,
and a headless system Chromium driven by Playwright (CI installs Debian's `chromium`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.dashboard.live_cluster import LiveCluster, chromium_path, launch_browser


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} (.ci/run installs it)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    """`sam up` with tenants `physics` (user alice) and `bio` (user bob)."""
    live = LiveCluster(Path(tmp_path_factory.mktemp("sam-up"))).start()
    try:
        live.add_tenant("physics", "alice")
        live.add_tenant("bio", "bob")
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """A headless Chromium (the system's; nothing is downloaded)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[dev]')")
    if chromium_path() is None:
        _missing("no chromium executable (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        chromium = launch_browser(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: object, cluster: LiveCluster) -> Iterator[object]:
    """A fresh browser context (its own sessionStorage) with every request it makes recorded
    in `page.requested`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.requested = []  # type: ignore[attr-defined]
    page.on("request", lambda request: page.requested.append(request.url))  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
