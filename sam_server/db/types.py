"""Small column helpers shared by the models and services."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes: treat them as UTC so comparisons work on both databases."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
