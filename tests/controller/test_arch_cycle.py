"""The live cycle over the real database places a job only on a wafer of its target arch."""

from __future__ import annotations

import pytest

from sam_domain.compile import CompiledArtifact
from sam_server.controller.loop import run_cycle
from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from tests.api.helpers import make_tenant, make_user, spec, submit

WAFERS = (("a2", "wse2"), ("b3", "wse3"))


@pytest.fixture
def mixed_settings(settings, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "cluster.yaml"
    lines = [f"  - {{id: {w}, arch: {a}, rows: 16, cols: 16}}" for w, a in WAFERS]
    path.write_text("wafers:\n" + "\n".join(lines) + "\ncompile_servers: 1\ncompile_slots: 3\n")
    return settings.model_copy(update={"cluster": path})


@pytest.fixture
def api(mixed_settings):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    with TestClient(create_app(mixed_settings)) as client:
        yield client


def test_wse3_and_wse2_jobs_land_on_wafers_of_their_arch(api, mixed_settings):
    url = mixed_settings.resolved_database_url
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    region = {"region": {"rows": 8, "cols": 8}}
    ids = {
        device: submit(
            api, alice, spec(device, compile_options={"target_device": device}, resources=region)
        ).json()["id"]
        for device in ("WSE-3", "WSE-2")
    }
    with session_scope(url) as s:
        for wafer, arch in WAFERS:
            lifecycle.heartbeat_wafer(s, wafer_id=wafer, worker="t", arch=arch, rows=16, cols=16)
    run_cycle(mixed_settings)  # both to compile
    for job_id in ids.values():
        with session_scope(url) as s:
            assert lifecycle.claim_compile(s, job_id=job_id, owner="c", lease_s=30) is not None
        with session_scope(url) as s:
            done = CompiledArtifact(job_id, False, 0.1, {})
            lifecycle.finish_compile(s, job_id=job_id, owner="c", result=done)
    assert run_cycle(mixed_settings).starts == 2
    with session_scope(url) as s:
        placed = {device: s.get(Job, job_id).wafer_id for device, job_id in ids.items()}
    assert placed == {"WSE-3": "b3", "WSE-2": "a2"}
