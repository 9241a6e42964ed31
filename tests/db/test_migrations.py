"""The Alembic migrations and the SQLAlchemy models describe the same schema, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from sam_server.db.models import Base
from sam_server.db.session import engine_for, upgrade_database


def test_migrations_match_models(db_url):
    upgrade_database(db_url)  # idempotent on an already-migrated database
    with engine_for(db_url).connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"


def test_upgrade_creates_every_table(db_url):
    upgrade_database(db_url)
    tables = set(inspect(engine_for(db_url)).get_table_names())
    assert {t.name for t in Base.metadata.sorted_tables} <= tables
