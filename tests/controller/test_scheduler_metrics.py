"""The scheduler's own /metrics: cycles, placements and the queue depth by tenant and reason."""

from __future__ import annotations

import re

import httpx
from sqlalchemy.orm import sessionmaker

from sam_server.controller.loop import run_cycle
from sam_server.controller.metrics import SchedulerMetrics
from sam_server.db.session import engine_for
from tests.api.helpers import make_tenant, make_user, spec, submit
from tests.conftest import free_port
from tests.controller.test_cycle import _compile_ok, _online, api, cluster_settings  # noqa: F401


def _value(text: str, pattern: str) -> float:
    match = re.search(pattern + r" ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


def test_scheduler_metrics_port_reports_cycles_and_queue(api, cluster_settings):  # noqa: F811
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    small = spec(resources={"region": {"rows": 8, "cols": 8}})
    first = submit(api, alice, small).json()["id"]
    second_id = submit(api, alice, spec(resources={"region": {"rows": 4, "cols": 4}})).json()["id"]
    _online(cluster_settings)
    url = cluster_settings.resolved_database_url
    metrics = SchedulerMetrics(sessionmaker(engine_for(url)))
    port = free_port()
    metrics.serve(port, token="sam_scrape_scheduler_test_token")
    # One compile server with two slots: acme may hold one (the other is kept for other tenants)
    metrics.observe(run_cycle(cluster_settings))
    second = api.get(f"/api/v1/jobs/{second_id}", headers=alice).json()
    assert (second["state"], second["reason"]) == ("queued", "CompilePending")
    # The cluster view shows the compile queue: the whole cluster's, and the caller's share
    queue = api.get("/api/v1/cluster", headers=alice).json()["compile_queue"]
    assert queue == {"queued": 1, "compiling": 1, "queued_mine": 1, "compiling_mine": 1}
    make_tenant(api, "other")
    bob = make_user(api, "other", "bob")
    theirs = api.get("/api/v1/cluster", headers=bob).json()["compile_queue"]
    assert theirs == {"queued": 1, "compiling": 1, "queued_mine": 0, "compiling_mine": 0}
    _compile_ok(cluster_settings, first)
    metrics.observe(run_cycle(cluster_settings))  # the first is placed

    scrape = {"Authorization": "Bearer sam_scrape_scheduler_test_token"}
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=scrape, timeout=10).text
    assert _value(text, "sam_scheduler_cycle_duration_seconds_count") == 2.0
    assert _value(text, "sam_scheduler_placements_total") == 1.0
    assert _value(text, "sam_scheduler_compiles_dispatched_total") >= 1.0
    depth = re.findall(
        r'sam_scheduler_queue_depth\{reason="[^"]*",state="[^"]+",tenant="acme"\}', text
    )
    assert depth, text  # the second job still waits, labelled with its tenant
    # One 8x8 region in a corner of the 16x16 wafer: 192 PEs free, the largest free rectangle
    # 8x16 = 128, so a third of the free PEs are outside it.
    assert _value(text, 'sam_scheduler_wafer_free_pes\\{wafer="w0"\\}') == 192
    assert _value(text, 'sam_scheduler_wafer_largest_free_rect_pes\\{wafer="w0"\\}') == 128
    frag = _value(text, 'sam_scheduler_wafer_fragmentation_ratio\\{wafer="w0"\\}')
    assert abs(frag - (1 - 128 / 192)) < 1e-9
    wafer = api.get("/api/v1/cluster", headers=alice).json()["wafers"][0]
    assert wafer["largest_free_rect"]["rows"] * wafer["largest_free_rect"]["cols"] == 128
    assert wafer["fragmentation"] == round(1 - 128 / 192, 4)
