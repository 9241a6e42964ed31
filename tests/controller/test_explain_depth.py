"""At scale a cycle rewrites only some explanations: the head of the queue every cycle, the rest
in a rotating slice (and at once when their first reason changes); each says when it was
planned. Checked with a tiny depth on the real databases."""

from __future__ import annotations

from sam_server.controller import decisions
from sam_server.controller.loop import run_cycle
from sam_server.db.models import Job
from sam_server.db.session import session_scope
from tests.api.helpers import make_tenant, make_user, spec, submit
from tests.controller.test_cycle import _online, api, cluster_settings  # noqa: F401


def _planned(settings, ids: list[str]) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as s:
        return {j: ((s.get(Job, j).explain or {}).get("planned_at")) for j in ids}


def test_deep_queue_explanations_rotate(api, cluster_settings, monkeypatch):  # noqa: F811
    monkeypatch.setattr(decisions, "EXPLAIN_DEPTH", 2)
    monkeypatch.setattr(decisions, "EXPLAIN_REFRESH", 2)
    monkeypatch.setitem(decisions._refresh_cursor, "at", 0)
    make_tenant(api, "acme")
    alice = make_user(api, "acme", "alice")
    big = spec(resources={"region": {"rows": 16, "cols": 16}})
    ids = [submit(api, alice, {**big, "name": f"j{k}"}).json()["id"] for k in range(8)]
    _online(cluster_settings)
    run_cycle(cluster_settings)  # one compiles; of the seven waiting only the head is written
    first = _planned(cluster_settings, ids)
    assert 1 <= sum(v is not None for v in first.values()) <= 2, first
    for _ in range(4):  # the slice moves on: every waiting job is explained within a few cycles
        run_cycle(cluster_settings)
    last = _planned(cluster_settings, ids)
    with session_scope(cluster_settings.resolved_database_url) as s:
        waiting = [j for j in ids if s.get(Job, j).state == "queued"]
    assert len(waiting) >= 6
    assert all(last[j] is not None for j in waiting), last
    info = api.get(f"/api/v1/jobs/{waiting[-1]}/explain", headers=alice).json()
    assert info["planned_at"] == last[waiting[-1]]
    assert info["reasons"][0]["code"] == "CompilePending"
