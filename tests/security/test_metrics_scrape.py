"""Issue 29: `GET /metrics` without a token showed every tenant's name, PEs held and steps
(`sam_cluster_allocated_pes{tenant="beta"}`) while `GET /tenants/beta` was a 404 to another
tenant. The series that name tenants now need the scrape token (SAM_METRICS_TOKEN, or the
cluster admin's); without one only the cluster-wide series are there, and a wrong one is a 401
(a misconfigured Prometheus sees its target down). The same on the scheduler's port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services.transitions import transition
from tests.api.helpers import ADMIN, make_tenant, make_user, submit
from tests.conftest import ADMIN_TOKEN, free_port

SCRAPE_TOKEN = "sam_scrape_" + "s3cret" * 4
TENANT_SERIES = (
    "sam_cluster_allocated_pes",
    "sam_queue_oldest_wait_seconds",
    "sam_cluster_training_steps",
)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A cluster where tenant `beta` has a running job (PEs held, steps) and a waiting one."""
    from fastapi.testclient import TestClient

    from sam_server.app import create_app
    from sam_server.config import Settings

    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'sam.db'}",
        admin_token=ADMIN_TOKEN,
        metrics_token=SCRAPE_TOKEN,
    )
    with TestClient(create_app(settings)) as client:
        make_tenant(client, "alpha")
        make_tenant(client, "beta")
        alice = make_user(client, "alpha", "alice")
        bob = make_user(client, "beta", "bob")
        running = submit(client, bob).json()["id"]
        submit(client, bob)
        with session_scope(settings.resolved_database_url) as s:
            job = s.get(Job, running)
            for state in ("compiling", "pending", "running"):
                transition(s, job, state)
            job.wafer_id, job.region_row, job.region_col = "wse-0", 0, 0
            job.region_rows, job.region_cols, job.progress_step = 8, 8, 42
        yield {"client": client, "alice": alice, "settings": settings}


def _families(text: str) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_without_a_token_no_series_names_a_tenant(world: dict[str, Any]) -> None:
    client = world["client"]
    assert client.get("/api/v1/tenants/beta", headers=world["alice"]).status_code == 404
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert "beta" not in answer.text and 'tenant="' not in answer.text
    families = _families(answer.text)
    for name in TENANT_SERIES:
        assert name not in families, name
    # the cluster-wide series stay: wafer sizes, jobs by state, API latency
    assert "sam_cluster_wafer_pes" in families and "sam_jobs" in families
    assert "sam_api_request_duration_seconds" in families


@pytest.mark.parametrize("token", [SCRAPE_TOKEN, ADMIN_TOKEN])
def test_the_scrape_token_or_the_admin_s_shows_the_tenant_series(
    world: dict[str, Any], token: str
) -> None:
    answer = world["client"].get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in _families(answer.text).values()
        for s in family
    }
    assert samples[("sam_cluster_allocated_pes", (("tenant", "beta"), ("wafer", "wse-0")))] == 64
    assert samples[("sam_cluster_training_steps", (("tenant", "beta"),))] == 42


def test_a_wrong_token_is_refused_and_a_tenant_s_is_forbidden(world: dict[str, Any]) -> None:
    client = world["client"]
    wrong = client.get("/metrics", headers={"Authorization": "Bearer sam_nope"})
    assert wrong.status_code == 401 and "beta" not in wrong.text
    basic = client.get("/metrics", headers={"Authorization": "Basic YTpi"})
    assert basic.status_code == 401
    tenant = client.get("/metrics", headers=world["alice"])
    assert tenant.status_code == 403 and "beta" not in tenant.text
    assert "SAM_METRICS_TOKEN" in tenant.json()["detail"]
    assert client.get("/metrics", headers=ADMIN).status_code == 200


def test_the_scheduler_port_keeps_the_queue_depth_by_tenant_to_the_scrape_token(
    world: dict[str, Any],
) -> None:
    from sqlalchemy.orm import sessionmaker

    from sam_server.controller.metrics import SchedulerMetrics
    from sam_server.db.session import engine_for

    url = world["settings"].resolved_database_url
    port = free_port()
    SchedulerMetrics(sessionmaker(engine_for(url))).serve(port, token=SCRAPE_TOKEN)
    base = f"http://127.0.0.1:{port}/metrics"
    public = httpx.get(base, timeout=10)
    assert public.status_code == 200
    assert "sam_scheduler_cycle_duration_seconds" in public.text
    assert "beta" not in public.text and "sam_scheduler_queue_depth{" not in public.text
    scraped = httpx.get(base, headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}, timeout=10)
    assert 'tenant="beta"' in scraped.text
    wrong = httpx.get(base, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert "beta" not in wrong.text
