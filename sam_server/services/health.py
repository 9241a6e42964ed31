"""Readiness checks the operations endpoints run."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session


def database_ready(session: Session) -> None:
    """A round trip to the database; raises when it does not answer."""
    session.execute(text("SELECT 1"))
