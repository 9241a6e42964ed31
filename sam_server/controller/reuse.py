"""Skip the compile servers for a queued job whose compile inputs were compiled before."""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_domain.json_value import JsonObject
from sam_server.db.models import Job
from sam_server.db.types import utcnow
from sam_server.services.lifecycle import reuse_artifacts
from sam_server.states import JobState

# A job in these states has no artifact of its own yet.
_BEFORE_ARTIFACT = frozenset((JobState.QUEUED.value, JobState.COMPILING.value))

# Per database: the queued and compiling jobs when these hashes were last found without an
# artifact. An artifact appears only when a job's compile ends, so while every one of those jobs
# is still queued or compiling the hashes need no new look (at 100,000 queued tasks of one
# array, the look was a scan of the jobs table every cycle).
_WITHOUT: dict[str, tuple[set[str], set[str]]] = {}


def reuse_compiled(session: Session, jobs: list[Any], *, limit: int = 2000) -> int:
    """Give queued jobs with a known artifact (same `compile_hash`) that artifact, set-based,
    at most `limit` a cycle (the cycle is one transaction; a 100,000-task array takes its
    artifacts over a few cycles, far faster than its tasks can run)."""
    queued = [
        j for j in jobs if j.state == JobState.QUEUED and j.compile_hash and not j.cancel_requested
    ]
    # (C-speed passes over 100,000 rows)
    states = map(attrgetter("state"), jobs)
    waiting = set(map(attrgetter("id"), compress(jobs, map(_BEFORE_ARTIFACT.__contains__, states))))
    url = str(session.get_bind().engine.url)
    tracked, without = _WITHOUT.get(url, (set(), set()))
    if not tracked <= waiting:  # some compile ended (or a job left): any hash may have one now
        without = set()
    _WITHOUT[url] = (waiting, without)
    if not queued:
        return 0
    hashes = {j.compile_hash for j in queued} - without
    known: dict[str, tuple[str, JsonObject | None]] = {}  # hash -> artifact, stored summary
    rows = (
        session.execute(
            select(Job.compile_hash, Job.compile_key, Job.compile_summary).where(
                Job.compile_hash.in_(hashes), Job.compile_key.is_not(None)
            )
        )
        if hashes
        else ()
    )
    for digest, key, summary in rows:
        if digest and key:  # as the query selects them
            known.setdefault(digest, (key, summary))
    without |= hashes - set(known)
    reused = 0
    batch = [j for j in queued if j.compile_hash in known][:limit]
    groups: dict[str, list[Any]] = {}
    for job in batch:
        groups.setdefault(job.compile_hash, []).append(job)
    for digest, group in groups.items():
        key, summary = known[digest]
        done = set(reuse_artifacts(session, [j.id for j in group], artifact=key, summary=summary))
        now = utcnow()
        for job in group:
            if job.id in done:  # as the database now has it (eligible: from now, as written)
                job.state, job.reason, job.eligible_at = JobState.PENDING.value, "Resources", now
        reused += len(done)
    return reused
