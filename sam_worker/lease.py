"""Keep a job's lease alive from a background thread while the work runs."""

from __future__ import annotations

import logging
import threading

from sam_server.db.session import session_scope
from sam_server.services.lifecycle import renew_lease

log = logging.getLogger("sam.worker.lease")


class LeaseKeeper:
    """Renews the lease every `every_s`; records stop requests and whether the lease was lost."""

    def __init__(self, url: str, job_id: str, owner: str, *, lease_s: float, every_s: float) -> None:
        self.url, self.job_id, self.owner = url, job_id, owner
        self.lease_s, self.every_s = lease_s, every_s
        self.lost = False
        self.cancel = False
        self.preempt = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{job_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self.renew()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def renew(self) -> None:
        """One renewal now; a failure to reach the database is retried at the next tick."""
        try:
            with session_scope(self.url) as session:
                flags = renew_lease(session, job_id=self.job_id, owner=self.owner, lease_s=self.lease_s)
        except Exception as exc:  # noqa: BLE001 - the database may be restarting
            log.warning("lease renewal for %s failed: %s", self.job_id, exc)
            return
        if flags is None:
            self.lost = True
            log.warning("lost the lease of job %s; stopping", self.job_id)
        else:
            self.cancel, self.preempt = flags["cancel"], flags["preempt"]

    @property
    def should_stop(self) -> bool:
        return self.lost or self.cancel or self.preempt

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.renew()
            if self.lost:
                return
