"""Engines, sessions and schema upgrades for SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.pool import ConnectionPoolEntry


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # WAL lets readers run beside the one writer; busy_timeout makes writers wait instead of failing
    # when the scheduler, the server and the workers share one file.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """An engine for `url`; on SQLite the directory is created and WAL mode is switched on."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    # No pre-ping: it costs a round trip per request; a connection broken by a database restart
    # is invalidated on its first error and the pool reconnects.
    return create_engine(url, pool_size=pool_size, max_overflow=20, pool_recycle=1800)


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    """One shared engine per URL in this process."""
    return make_engine(url)


@lru_cache(maxsize=8)
def session_factory(url: str) -> sessionmaker[Session]:
    """A sessionmaker bound to the shared engine of `url`."""
    return sessionmaker(engine_for(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session of the database at `url` that commits on success and rolls back on error."""
    with transaction(session_factory(url)) as session:
        yield session


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session from `factory` that commits on success and rolls back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Config:
    """The Alembic configuration for SAM's migrations, pointed at `url`."""
    from alembic.config import Config

    import migrations

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_database(url: str) -> None:
    """Create or upgrade the schema to the newest migration (`sam db upgrade`)."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")
