"""The one simulated wafer a wafer-worker process owns, shared by the jobs it runs at once."""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from typing import Any

from sam_server.config import get_settings
from sam_server.db.session import session_scope
from sam_server.services.lifecycle import heartbeat_wafer
from sam_worker.identity import WORKER_ID

log = logging.getLogger("sam.worker.wafer")


class WaferHost:
    """A `wse_sim.Wafer` for the cluster file's wafer `wafer_id`, plus its heartbeat thread."""

    def __init__(self, wafer_id: str) -> None:
        from wse_sim import Wafer

        settings = get_settings()
        cluster = settings.load_cluster()
        cfg = next((w for w in cluster.wafers if w.id == wafer_id), None)
        if cfg is None:
            known = ", ".join(w.id for w in cluster.wafers)
            raise SystemExit(f"wafer {wafer_id!r} is not in the cluster file (known: {known})")
        self.wafer_id, self.arch, self.rows, self.cols = (
            cfg.id,
            cfg.arch,
            cfg.rows or 0,
            cfg.cols or 0,
        )
        self.wafer = Wafer(cfg.arch, rows=self.rows, cols=self.cols)
        self.lock = threading.Lock()  # the wafer's region table is shared by the worker's threads
        self._stop = threading.Event()

    def load(self, artifact: Any, rect: tuple[int, int, int, int], *, owner: str) -> Any:
        from wse_sim import runtime

        with self.lock:
            if owner in self.wafer.regions:  # a previous attempt of this job died in this process
                self.wafer.release(owner)
            return runtime.load(artifact, self.wafer, rect, owner)

    def release(self, owner: str, job: Any) -> None:
        with self.lock:
            try:
                job.release()
            finally:
                if owner in self.wafer.regions:
                    self.wafer.release(owner)

    def beat(self) -> None:
        with session_scope(get_settings().resolved_database_url) as session:
            heartbeat_wafer(
                session,
                wafer_id=self.wafer_id,
                worker=WORKER_ID,
                arch=self.arch,
                rows=self.rows,
                cols=self.cols,
            )

    def start_heartbeat(self) -> None:
        every = get_settings().heartbeat_s

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.beat()
                except Exception as exc:  # noqa: BLE001 - the database may be restarting
                    log.warning("heartbeat of %s failed: %s", self.wafer_id, exc)
                self._stop.wait(every)

        threading.Thread(target=loop, name="wafer-heartbeat", daemon=True).start()


@lru_cache(maxsize=1)
def host() -> WaferHost:
    """This process's wafer (named by SAM_WORKER_WAFER, set by `sam worker wafer --wafer ID`)."""
    wafer_id = os.environ.get("SAM_WORKER_WAFER")
    if not wafer_id:
        raise RuntimeError("this worker owns no wafer; start it with `sam worker wafer --wafer ID`")
    return WaferHost(wafer_id)
