"""Shared fixtures: the databases (SQLite and the real PostgreSQL), the app, a live server.

Service-backed tests never skip silently in CI: with CI=true a missing PostgreSQL or Redis is a
failure, not a skip.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

POSTGRES_URL = os.environ.get("SAM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
# pytest-xdist's worker name (gw0, gw1, ...); "" in a plain, single-process run.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ADMIN_TOKEN = "sam_admin_test_token"


def service_missing(what: str, exc: Exception) -> None:
    """Fail in CI, skip on a developer machine."""
    message = f"{what} is not reachable: {exc}"
    if IN_CI:
        pytest.fail(message + " (CI must provide it; .ci/run starts it)")
    pytest.skip(message)


def _pg_admin_url() -> str:
    return POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1)


def create_pg_database() -> str:
    """A fresh, empty PostgreSQL database; returns its URL."""
    name = f"sam_test_{uuid.uuid4().hex[:10]}"
    try:
        engine = create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001
        service_missing("PostgreSQL", exc)
    base = POSTGRES_URL.rsplit("/", 1)[0]
    return f"{base}/{name}"


def drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    from sam_server.db.session import engine_for

    engine_for(url).dispose()
    engine = create_engine(_pg_admin_url(), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """One PostgreSQL database for the session, migrated to head."""
    from sam_server.db.session import upgrade_database

    url = create_pg_database()
    upgrade_database(url)
    yield url
    drop_pg_database(url)


def _truncate_all(url: str) -> None:
    from sam_server.db.models import Base
    from sam_server.db.session import engine_for

    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with engine_for(url).begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same tests on SQLite (a fresh file) and on the real PostgreSQL (emptied)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sam.db'}"
    url = request.getfixturevalue("pg_database")
    _truncate_all(url)
    return url


@pytest.fixture
def settings(db_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    from sam_server.config import Settings

    return Settings(data_dir=tmp_path / "data", database_url=db_url, admin_token=ADMIN_TOKEN)


@pytest.fixture
def client(settings):  # type: ignore[no-untyped-def]
    """An in-process HTTP client of the real app."""
    from fastapi.testclient import TestClient

    from sam_server.app import create_app

    with TestClient(create_app(settings)) as test_client:
        yield test_client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """The real app under uvicorn in a background thread, on a free port."""

    def __init__(self, settings) -> None:  # type: ignore[no-untyped-def]
        import uvicorn

        from sam_server.app import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the live server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live_server(settings) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    """A real HTTP server (uvicorn) on the test database; `.url` is its base URL."""
    with LiveServer(settings) as server:
        yield server


def worker_redis_url(url: str = REDIS_URL, worker: str = XDIST_WORKER) -> str:
    """`url` with its database number lowered by the xdist worker's index (gw0: 15, gw1: 14,
    ...), so that parallel workers never flush each other's keys."""
    index = int(worker[2:]) if worker.startswith("gw") else 0
    base, _, db = url.rpartition("/")
    number = int(db) - index
    if not 0 <= number < 16:
        raise RuntimeError(f"too many test workers for Redis databases below {db}: {worker}")
    return f"{base}/{number}"


@pytest.fixture
def redis_url() -> str:
    """The real Redis (database 15, one lower per parallel worker), flushed; fails in CI if
    Redis is down."""
    import redis

    url = worker_redis_url()
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
        client.flushdb()
    except Exception as exc:  # noqa: BLE001
        service_missing("Redis", exc)
    return url


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """For parallel runs (`make test`: pytest-xdist with --dist loadgroup): the tests that share
    a module- or package-scoped fixture (a live cluster, a compiled artifact) are one group, run
    on one worker, so that the fixture is still built once; every other test goes to whichever
    worker is free."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        scopes = {
            definitions[-1].scope
            for name in (info.names_closure if info else ())
            if (definitions := info.name2fixturedefs.get(name))
        }
        module = item.nodeid.split("::")[0]
        if "package" in scopes:
            item.add_marker(pytest.mark.xdist_group(module.rpartition("/")[0]))
        elif scopes & {"module", "class"}:
            item.add_marker(pytest.mark.xdist_group(module))
