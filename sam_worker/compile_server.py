"""A compile server's heartbeat: liveness and counters for `sam cluster` and the scheduler."""

from __future__ import annotations

import logging
import threading

from sam_server.config import get_settings
from sam_server.db.session import session_scope
from sam_server.services.lifecycle import heartbeat_compile_server
from sam_worker.identity import WORKER_ID

log = logging.getLogger("sam.worker.compile")

STATS = {"busy": 0, "compiles": 0, "cache_hits": 0}
_STATS_LOCK = threading.Lock()


def count(key: str, delta: int = 1) -> None:
    """Adjust one of this server's counters (busy, compiles, cache_hits)."""
    with _STATS_LOCK:
        STATS[key] += delta


def start_heartbeat() -> None:
    """Beat every `heartbeat_s` seconds in a daemon thread."""
    settings = get_settings()

    def loop() -> None:
        while True:
            try:
                with session_scope(settings.resolved_database_url) as session:
                    heartbeat_compile_server(session, server_id=WORKER_ID, **STATS)
            except Exception as exc:  # noqa: BLE001
                log.warning("compile-server heartbeat failed: %s", exc)
            threading.Event().wait(settings.heartbeat_s)

    threading.Thread(target=loop, name="compile-heartbeat", daemon=True).start()
