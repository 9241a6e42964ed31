"""Two identical jobs submitted one after the other start in that order (issue 29: submitted
70 ms apart, the later one's compile ended first, it started and took the tenant's max_pes, and
the earlier waited on QuotaMaxPes). Only the first is compiled; the second takes its artifact
in the cycle that makes the first pending, eligible from then, and the queue order decides."""

from __future__ import annotations

from sqlalchemy import select

from sam_domain.compile import CompiledArtifact
from sam_server.controller.loop import run_cycle
from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from tests.api.helpers import make_tenant, make_user, submit


def _jobs(url: str) -> dict[str, Job]:
    with session_scope(url) as s:
        rows = list(s.execute(select(Job)).scalars())
        s.expunge_all()
    return {j.id: j for j in rows}


def test_the_earlier_of_two_identical_jobs_starts_first(client, settings, tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "wafers:\n  - {id: w0, arch: wse2, rows: 32, cols: 32}\n"
        "compile_servers: 1\ncompile_slots: 4\n"
    )
    cluster = settings.model_copy(update={"cluster": path})
    url = settings.resolved_database_url
    make_tenant(client, "lab", max_pes=16)  # one 4x4 job at a time
    alice = make_user(client, "lab", "alice")
    first = submit(client, alice).json()["id"]
    second = submit(client, alice).json()["id"]
    with session_scope(url) as s:
        lifecycle.heartbeat_wafer(s, wafer_id="w0", worker="t", arch="wse2", rows=32, cols=32)
    run_cycle(cluster)
    jobs = _jobs(url)
    assert jobs[first].state == "compiling"
    assert jobs[second].state == "queued", "an identical compile is not run twice"
    # The compile servers finish what they were given, the later job's first if it had one.
    for job in sorted(jobs.values(), key=lambda j: j.id != second):
        if job.state != "compiling":
            continue
        with session_scope(url) as s:
            assert lifecycle.claim_compile(s, job_id=job.id, owner="c", lease_s=30)
        with session_scope(url) as s:
            result = CompiledArtifact("k-same", False, 0.1)
            lifecycle.finish_compile(s, job_id=job.id, owner="c", result=result)
    for _ in range(2):
        run_cycle(cluster)
        jobs = _jobs(url)
        assert jobs[first].state == "running"
        assert jobs[second].state == "pending" and jobs[second].reason == "QuotaMaxPes"
    assert jobs[second].compile_key == "k-same" and jobs[second].compile_cache_hit
