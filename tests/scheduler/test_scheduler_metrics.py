"""The scheduler's own /metrics: cycles, placements and the queue depth by tenant and reason."""

from __future__ import annotations

import re

import httpx
from sqlalchemy.orm import sessionmaker

from sam_server.db.session import engine_for
from sam_server.scheduler.loop import run_cycle
from sam_server.scheduler.metrics import SchedulerMetrics
from tests.api.helpers import make_tenant, make_user, spec, submit
from tests.conftest import free_port
from tests.scheduler.test_cycle import _compile_ok, _online, api, cluster_settings  # noqa: F401


def _value(text: str, pattern: str) -> float:
    match = re.search(pattern + r" ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


def test_scheduler_metrics_port_reports_cycles_and_queue(api, cluster_settings):  # noqa: F811
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    small = spec(resources={"region": {"rows": 8, "cols": 8}})
    first = submit(api, alice, small).json()["id"]
    submit(api, alice, small)
    _online(cluster_settings)
    url = cluster_settings.resolved_database_url
    metrics = SchedulerMetrics(sessionmaker(engine_for(url)))
    port = free_port()
    metrics.serve(port)
    metrics.observe(run_cycle(cluster_settings))  # both go to compile (one compile server)
    _compile_ok(cluster_settings, first)
    metrics.observe(run_cycle(cluster_settings))  # the first is placed

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert _value(text, "sam_scheduler_cycle_duration_seconds_count") == 2.0
    assert _value(text, "sam_scheduler_placements_total") == 1.0
    assert _value(text, "sam_scheduler_compiles_dispatched_total") >= 1.0
    depth = re.findall(
        r'sam_scheduler_queue_depth\{reason="[^"]*",state="[^"]+",tenant="acme"\}', text
    )
    assert depth, text  # the second job still waits, labelled with its tenant
