"""Keep a job's lease alive from a background thread while the work runs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sam_server.db.session import session_scope
from sam_server.services.lifecycle import read_flags, renew_lease

log = logging.getLogger("sam.worker.lease")


class LeaseKeeper:
    """Renews the lease every `every_s`; in between, reads the job's stop flags every `poll_s`,
    so a cancel or a preemption is seen within about 0.1 s (a few steps)."""

    def __init__(
        self,
        url: str,
        job_id: str,
        owner: str,
        *,
        lease_s: float,
        every_s: float,
        poll_s: float = 0.1,
    ) -> None:
        self.url, self.job_id, self.owner = url, job_id, owner
        self.lease_s, self.every_s, self.poll_s = lease_s, every_s, min(poll_s, every_s)
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
        self._check(renew_lease, logging.WARNING, lease_s=self.lease_s)

    def poll_flags(self) -> None:
        """Read the stop flags without writing (cheap enough for every tenth of a second)."""
        self._check(read_flags, logging.DEBUG)  # polled often: a failure is not news

    @property
    def should_stop(self) -> bool:
        return self.lost or self.cancel or self.preempt

    def _check(
        self, verb: Callable[..., dict[str, bool] | None], level: int, **extra: float
    ) -> None:
        """Run `verb` (renew or read) and record the stop flags, or that the lease is lost."""
        try:
            with session_scope(self.url) as session:
                flags = verb(session, job_id=self.job_id, owner=self.owner, **extra)
        except Exception as exc:  # noqa: BLE001 - the database may be restarting
            log.log(level, "lease check of %s failed: %s", self.job_id, exc)
            return
        if flags is None:
            self.lost = True
            log.warning("lost the lease of job %s; stopping", self.job_id)
        else:
            self.cancel, self.preempt = flags["cancel"], flags["preempt"]

    def _run(self) -> None:
        next_renew = time.monotonic() + self.every_s
        while not self._stop.wait(self.poll_s):
            if time.monotonic() >= next_renew:
                self.renew()
                next_renew = time.monotonic() + self.every_s
            else:
                self.poll_flags()
            if self.lost:
                return
