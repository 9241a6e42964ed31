"""A checkpointing job is moved, on a real local cluster, to another region mid-training (the
policy's defragmentation by migration, through the preemption path) and resumes with the same
losses as an unmoved run of the same spec."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.db.types import utcnow
from sam_worker.checks import attempts, double_runs, region_conflicts
from tests.e2e.test_cancel_preempt import _setup, _spec, _submit, _wait, small_cluster
from tests.e2e.test_flexible_region import _losses

pytestmark = pytest.mark.slow
__all__ = ["small_cluster"]  # the fixture, shared with the cancel/preempt tests


def _column(name: str, steps: int, limit: str, checkpoint: bool = True) -> dict:  # type: ignore[type-arg]
    """A 64x16 column of the 64x64 wafer (one program for all: each start reuses one artifact)."""
    spec = _spec(name, steps, hidden=256)
    spec["resources"] = {"region": {"rows": 64, "cols": 16}, "time_limit": limit}
    spec["run_options"]["checkpoint_enabled"] = checkpoint
    return spec


def _running_at(c, who, job_id: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    job = _wait(c, who, job_id, lambda j: j["state"] == "running")
    region = job["region"]
    return region["row"], region["col"]


def test_a_migrated_job_resumes_with_the_same_losses(small_cluster):
    c = small_cluster
    pi = _setup(c)
    url = c.settings.resolved_database_url
    # Four 64x16 columns, started one after the other, fill the wafer left to right: a short
    # one, the checkpointing job to move, a long job that cannot checkpoint, a short one.
    first = _submit(c, pi, _column("first", 20, "10m"))
    assert _running_at(c, pi, first) == (0, 0)
    moved = _submit(c, pi, _column("moved", 1500, "2h"))
    assert _running_at(c, pi, moved) == (0, 16)
    wall = _submit(c, pi, _column("wall", 1_000_000, "2h", checkpoint=False))
    assert _running_at(c, pi, wall) == (0, 32)
    last = _submit(c, pi, _column("last", 20, "10m"))
    assert _running_at(c, pi, last) == (0, 48)
    # Once the short ones end, columns 0-15 and 48-63 are free: a 64x32 job fits only if
    # `moved` goes to 48-63 (submitted now, it compiles meanwhile).
    wide_spec = _spec("wide", 20, hidden=256)
    wide_spec["resources"] = {"region": {"rows": 64, "cols": 32}, "time_limit": "10m"}
    wide = _submit(c, pi, wide_spec)
    for job_id in (first, last):
        assert _wait(c, pi, job_id, lambda j: j["state"] in ("succeeded", "failed"))["state"] == (
            "succeeded"
        )
    _wait(c, pi, wide, lambda j: j["state"] == "pending")
    assert _wait(c, pi, moved, lambda j: True)["state"] == "running"
    # As if it had waited an hour (the policy moves a job only for one that has waited and
    # would wait at least half an hour more: `moved` and `wall` hold the wafer for 2 h).
    with session_scope(url) as s:
        s.execute(
            update(Job).where(Job.id == wide).values(eligible_at=utcnow() - timedelta(hours=1))
        )
    done = _wait(c, pi, wide, lambda j: j["state"] in ("succeeded", "failed"))
    assert done["state"] == "succeeded", done
    resumed = _wait(c, pi, moved, lambda j: j["state"] in ("succeeded", "failed"))
    assert resumed["state"] == "succeeded" and resumed["attempts"] == 2, resumed
    runs = attempts(url, [moved])
    assert [r.outcome for r in runs] == ["preempted", "succeeded"]
    assert (runs[0].row, runs[0].col) == (0, 16) and (runs[1].row, runs[1].col) == (0, 48)
    assert runs[1].start_step >= 10  # resumed from a checkpoint, not from step 0
    (placed,) = attempts(url, [wide])
    assert (placed.row, placed.col, placed.rows, placed.cols) == (0, 0, 64, 32)
    logs = httpx.get(f"{c.url}/api/v1/jobs/{moved}/logs", headers=pi).text
    assert f"preempted for job {wide}: migrated to tiny" in logs
    httpx.post(f"{c.url}/api/v1/jobs/{wall}/cancel", headers=pi).raise_for_status()
    # The same spec, never moved: the same loss at every step.
    still = _submit(c, pi, _column("still", 1500, "2h"))
    assert _wait(c, pi, still, lambda j: j["state"] in ("succeeded", "failed"))["state"] == (
        "succeeded"
    )
    losses = _losses(c, pi, moved)
    assert len(losses) == 1500
    assert losses == pytest.approx(_losses(c, pi, still), rel=1e-6)
    assert double_runs(url) == [] and region_conflicts(url) == []
