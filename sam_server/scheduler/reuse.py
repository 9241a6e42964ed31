"""Skip the compile servers for a queued job whose compile inputs were compiled before."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.services.lifecycle import reuse_artifact


def reuse_compiled(session: Session, jobs: list[Any]) -> int:
    """Give every queued job with a known artifact (same `compile_hash`) that artifact."""
    queued = [j for j in jobs if j.state == "queued" and j.compile_hash and not j.cancel_requested]
    if not queued:
        return 0
    hashes = {j.compile_hash for j in queued}
    known: dict[str, tuple[str, dict | None]] = {}  # type: ignore[type-arg]
    rows = session.execute(
        select(Job.compile_hash, Job.compile_key, Job.compile_summary).where(
            Job.compile_hash.in_(hashes), Job.compile_key.is_not(None)
        )
    )
    for digest, key, summary in rows:
        known.setdefault(digest, (key, summary))
    reused = 0
    for job in queued:
        if job.compile_hash in known:
            key, summary = known[job.compile_hash]
            row = session.get(Job, job.id)  # `jobs` are the cycle's plain rows
            if row is None or row.state != "queued":
                continue
            reuse_artifact(session, row, artifact=key, summary=summary)
            job.state, job.reason = row.state, row.reason  # as the database now has it
            reused += 1
    return reused
