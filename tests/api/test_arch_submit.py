"""Submit refuses a job whose target arch no wafer of the cluster has (422, with the reason)."""

from __future__ import annotations

import pytest

from sam_server.db.models import Wafer
from sam_server.db.session import session_scope
from sam_server.services import jobs as job_service
from tests.api.helpers import make_tenant, make_user, spec, submit


@pytest.fixture
def alice(client):  # type: ignore[no-untyped-def]
    make_tenant(client, "physics")
    return make_user(client, "physics", "alice")


def _wse3_spec():  # type: ignore[no-untyped-def]
    return spec("on-wse3", compile_options={"target_device": "WSE-3"})


def test_a_wse3_job_on_a_wse2_only_cluster_is_refused_with_the_reason(client, alice):
    r = submit(client, alice, _wse3_spec())
    assert r.status_code == 422, r.text
    body = r.json()
    assert "wse3" in body["detail"] and "wse2" in body["detail"]
    assert body["errors"][0]["field"] == "spec.compile_options.target_device"
    listed = client.get("/api/v1/jobs", headers=alice).json()["items"]
    assert listed == []  # nothing was stored


def test_a_wse3_job_is_accepted_once_the_cluster_has_a_wse3_wafer(client, alice, settings):
    with session_scope(settings.resolved_database_url) as session:
        session.add(Wafer(id="wse3-0", arch="wse3", rows=64, cols=64, state="offline"))
    job_service._WAFER_CACHE.clear()  # submit caches the wafer list for a few seconds
    r = submit(client, alice, _wse3_spec())
    assert r.status_code == 201, r.text
    # a WSE-2 job still fits the WSE-2 wafers, and a region only a WSE-2 wafer holds is refused
    assert submit(client, alice, spec("on-wse2")).status_code == 201
    big = _wse3_spec()
    big["resources"] = {"region": {"rows": 100, "cols": 100}}
    r = submit(client, alice, big)
    assert r.status_code == 422 and "larger than every wafer" in r.json()["detail"]
