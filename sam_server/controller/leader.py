"""One controller leader at a time: a PostgreSQL advisory lock, or a file lock on SQLite."""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout
from sqlalchemy import Connection, text

from sam_server.db.session import engine_for

_LOCK_KEY = 0x5A4D5343  # "SAMS"


class Leadership:
    """Try to become the leader; `held` says whether this process is it."""

    def __init__(self, database_url: str, data_dir: Path) -> None:
        self.url = database_url
        self.held = False
        self._conn: Connection | None = None
        self._file: FileLock | None = None
        if database_url.startswith("sqlite"):
            data_dir.mkdir(parents=True, exist_ok=True)
            self._file = FileLock(str(data_dir / "scheduler.lock"))

    def try_acquire(self) -> bool:
        """Become the leader if nobody is; never blocks."""
        if self.held:
            return True
        if self._file is not None:
            try:
                self._file.acquire(timeout=0)
                self.held = True
            except Timeout:
                self.held = False
            return self.held
        # The advisory lock lives as long as this session: keep the connection open while leading.
        self._conn = self._conn or engine_for(self.url).connect()
        got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK_KEY}).scalar()
        self._conn.commit()
        self.held = bool(got)
        return self.held

    def release(self) -> None:
        if self._file is not None and self.held:
            self._file.release()
        if self._conn is not None:
            if self.held:  # pooled connections outlive close(): drop the session lock explicitly
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
                self._conn.commit()
            self._conn.close()
            self._conn = None
        self.held = False
