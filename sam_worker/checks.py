"""Checks over the recorded allocation history (used by `sam demo` and the integration tests)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import select

from sam_server.db.models import JobAttempt
from sam_server.db.session import session_scope
from sam_server.db.types import as_utc, utcnow


def _interval(a: JobAttempt) -> tuple[datetime, datetime]:
    start = as_utc(a.placed_at) or utcnow()
    end = as_utc(a.ended_at) or utcnow()
    return start, end


def _rects_overlap(a: JobAttempt, b: JobAttempt) -> bool:
    return (
        a.row < b.row + b.rows
        and b.row < a.row + a.rows
        and a.col < b.col + b.cols
        and b.col < a.col + a.cols
    )


def attempts(url: str, job_ids: list[str] | None = None) -> list[JobAttempt]:
    """Every recorded attempt (allocation), optionally of some jobs only."""
    with session_scope(url) as session:
        query = select(JobAttempt).order_by(JobAttempt.id)
        if job_ids is not None:
            query = query.where(JobAttempt.job_id.in_(job_ids))
        return list(session.execute(query).scalars())


def _held_together(rows: list[JobAttempt]) -> Iterator[tuple[JobAttempt, JobAttempt]]:
    """Every pair of attempts whose holding intervals overlap in time."""
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            (s1, e1), (s2, e2) = _interval(a), _interval(b)
            if s1 < e2 and s2 < e1:
                yield a, b


def overlapping_pairs(url: str, job_ids: list[str]) -> list[tuple[str, str, str]]:
    """Pairs of different jobs whose attempts held regions of one wafer at the same time."""
    return [
        (a.job_id, b.job_id, a.wafer_id)
        for a, b in _held_together(attempts(url, job_ids))
        if a.job_id != b.job_id and a.wafer_id == b.wafer_id
    ]


def region_conflicts(url: str) -> list[tuple[int, int]]:
    """Attempts whose rectangles overlapped on one wafer while both were held (must be none)."""
    return [
        (a.id, b.id)
        for a, b in _held_together(attempts(url))
        if a.wafer_id == b.wafer_id and _rects_overlap(a, b)
    ]


def double_runs(url: str) -> list[str]:
    """Jobs that had two attempts running at the same time (must be none)."""
    return [a.job_id for a, b in _held_together(attempts(url)) if a.job_id == b.job_id]
