"""The API's `/metrics` reports the cluster as the database records it (occupancy by wafer and
tenant, the longest wait, training steps, compile servers), on SQLite and PostgreSQL. The series
that name tenants need the scrape or admin token: tests/security/test_metrics_scrape.py."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.db.types import utcnow
from sam_server.services import lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, submit


def _samples(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:  # type: ignore[no-untyped-def]
    text = client.get("/metrics", headers=ADMIN).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_show_occupancy_waits_steps_and_compiles(client, settings) -> None:  # type: ignore[no-untyped-def]
    url = settings.resolved_database_url
    make_tenant(client, "acme")
    make_tenant(client, "physics")
    alice = make_user(client, "acme", "alice")
    bob = make_user(client, "physics", "bob")
    running = submit(client, alice).json()["id"]
    old_wait = submit(client, bob).json()["id"]
    submit(client, bob)
    with session_scope(url) as s:
        job = s.get(Job, running)
        for state in ("compiling", "pending", "running"):
            transition(s, job, state)
        job.wafer_id, job.region_row, job.region_col = "wse-0", 0, 0
        job.region_rows, job.region_cols, job.progress_step = 16, 32, 120
        s.get(Job, old_wait).created_at = utcnow() - timedelta(minutes=10)
        lifecycle.heartbeat_wafer(s, wafer_id="wse-0", worker="w0", arch="wse2", rows=750, cols=994)
        lifecycle.heartbeat_compile_server(s, server_id="c1", busy=1, compiles=7, cache_hits=3)

    got = _samples(client)
    assert got[("sam_cluster_allocated_pes", (("tenant", "acme"), ("wafer", "wse-0")))] == 512
    assert not any(
        k[0] == "sam_cluster_allocated_pes" and ("tenant", "physics") in k[1] for k in got
    )
    assert got[("sam_cluster_wafer_pes", (("arch", "wse2"), ("wafer", "wse-0")))] == 750 * 994
    assert got[("sam_cluster_wafer_online", (("wafer", "wse-0"),))] == 1
    assert got[("sam_cluster_wafer_online", (("wafer", "wse-1"),))] == 0
    wait = got[("sam_queue_oldest_wait_seconds", (("tenant", "physics"),))]
    assert 595 < wait < 900, "the oldest of physics' waiting jobs, not the newest"
    assert ("sam_queue_oldest_wait_seconds", (("tenant", "acme"),)) not in got  # acme's runs
    assert got[("sam_cluster_training_steps", (("tenant", "acme"),))] == 120
    assert got[("sam_cluster_compiles_total", (("server", "c1"),))] == 7
    assert got[("sam_cluster_compile_cache_hits_total", (("server", "c1"),))] == 3
    assert got[("sam_cluster_compiles_busy", (("server", "c1"),))] == 1
