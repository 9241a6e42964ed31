"""A flexible job starts, on a real local cluster, in a shape it did not ask for and trains the
same as in its asked shape."""

from __future__ import annotations

import httpx
import pytest

from sam_worker.checks import attempts, region_conflicts
from tests.e2e.test_cancel_preempt import _setup, _spec, _submit, _wait, small_cluster

pytestmark = pytest.mark.slow
__all__ = ["small_cluster"]  # the fixture, shared with the cancel/preempt tests


def _losses(c, who, job_id: str) -> list[float]:  # type: ignore[no-untyped-def]
    steps = httpx.get(f"{c.url}/api/v1/jobs/{job_id}/metrics", headers=who).json()["steps"]
    return [s["loss"] for s in steps]


def test_a_flexible_job_starts_rotated_and_trains_with_the_same_losses(small_cluster):
    c = small_cluster
    pi = _setup(c)
    # A 64x40 job leaves a 64-row x 24-col strip of the 64x64 wafer.
    blocker_spec = _spec("blocker", 3000, hidden=512)
    blocker_spec["resources"]["region"] = {"rows": 64, "cols": 40}
    blocker = _submit(c, pi, blocker_spec)
    _wait(c, pi, blocker, lambda j: j["state"] == "running")
    flexible = _spec("flex", 30, hidden=64)
    flexible["resources"]["region"] = {"rows": 24, "cols": 40, "flexible": True}
    flex = _submit(c, pi, flexible)
    done = _wait(c, pi, flex, lambda j: j["state"] in ("succeeded", "failed"))
    assert done["state"] == "succeeded", done
    url = c.settings.resolved_database_url
    (run,) = attempts(url, [flex])
    assert (run.rows, run.cols) != (24, 40)  # 24x40 never fit beside the blocker
    assert run.rows * run.cols >= 24 * 40 and run.cols <= 24
    httpx.post(f"{c.url}/api/v1/jobs/{blocker}/cancel", headers=pi).raise_for_status()
    rigid = dict(flexible, name="rigid")
    rigid["resources"] = {**flexible["resources"], "region": {"rows": 24, "cols": 40}}
    same = _submit(c, pi, rigid)
    assert _wait(c, pi, same, lambda j: j["state"] in ("succeeded", "failed"))["state"] == (
        "succeeded"
    )
    (asked,) = attempts(url, [same])
    assert (asked.rows, asked.cols) == (24, 40)
    losses = _losses(c, pi, flex)
    assert len(losses) == 30
    assert losses == pytest.approx(_losses(c, pi, same), rel=1e-6)
    assert region_conflicts(url) == []
