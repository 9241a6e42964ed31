"""Start-up: schema, admin principal and the wafers of the cluster file."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.config import ClusterConfig, Settings
from sam_server.db.models import Wafer
from sam_server.db.session import engine_for, session_scope, upgrade_database
from sam_server.errors import ConfigError
from sam_server.services.auth import bootstrap_admin


def prepare_database(settings: Settings) -> None:
    """SQLite: create or upgrade the schema. Postgres: require `sam db upgrade` to have run.
    Then make sure the admin token works and the cluster's wafers are registered."""
    url = settings.resolved_database_url
    if url.startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        upgrade_database(url)
    else:
        _require_schema(url)
    with session_scope(url) as session:
        bootstrap_admin(session, token=settings.ensure_admin_token())
        register_wafers(session, settings.load_cluster())


def _require_schema(url: str) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from sam_server.db.session import alembic_config

    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    with engine_for(url).connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise ConfigError(
            f"the database is at migration {current!r}, not {head!r}: run `sam db upgrade` first"
        )


def register_wafers(session: Session, cluster: ClusterConfig) -> None:
    """Insert or update each wafer of the cluster file (a worker marks it online)."""
    known = {w.id: w for w in session.execute(select(Wafer)).scalars()}
    for cfg in cluster.wafers:
        wafer = known.get(cfg.id)
        if wafer is None:
            session.add(
                Wafer(id=cfg.id, arch=cfg.arch, rows=cfg.rows, cols=cfg.cols, state="offline")
            )
        else:
            wafer.arch, wafer.rows, wafer.cols = (
                cfg.arch,
                cfg.rows or wafer.rows,
                cfg.cols or wafer.cols,
            )
