"""The typed seam between a wafer worker and one run (attempt) of a job.

`RunContext` is what the worker gives a run: the claim (job id, attempt, spec, files, region, the
artifact to load), the settings, the lease (cancel and preempt flags), the step reporter, the
checkpoint and scratch folders, and the time limit with the stop check every loop polls.
`RunOutcome` is what comes back: how the run ended (`RunEnd`), the error kind and message of a
failure, the steps it reached and its performance report; `lifecycle.finish_run` records it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam_domain.run import RunOptions, RunSpec
from sam_server.config import Settings
from sam_server.services.lifecycle import Claim
from sam_server.states import RunEnd
from sam_worker.lease import LeaseKeeper
from sam_worker.steps import StepReporter


@dataclass
class RunContext:
    """One attempt of a job on this worker's wafer, as the worker hands it to the run."""

    claim: Claim  # the job id, attempt, spec, files, region and artifact the scheduler chose
    settings: Settings
    owner: str  # the lease owner this attempt writes as
    lease: LeaseKeeper  # renews the lease; carries the cancel and preempt requests
    reporter: StepReporter  # each step's numbers and log lines, on their way to the database
    ckpt_dir: Path  # where this job's checkpoints are written and read
    deadline: float = float("inf")  # time.monotonic() past which the run stops (time_limit)
    timed_out: threading.Event = field(default_factory=threading.Event)

    @property
    def job_id(self) -> str:
        return self.claim.job_id

    @property
    def spec(self) -> dict[str, Any]:
        return self.claim.spec

    @property
    def run_opts(self) -> RunOptions:
        """The spec's run options, typed (sam_domain.run)."""
        return RunSpec.of(self.claim.spec).run

    @property
    def region(self) -> tuple[int, int, int, int]:
        """(row, col, rows, cols) of the job's region on this wafer."""
        if self.claim.region is None:
            raise ValueError(f"job {self.job_id} was claimed for a run without a region")
        return self.claim.region

    @property
    def workdir(self) -> Path:
        """The run's scratch folder (make_batch's working directory)."""
        return (self.settings.data_dir / "scratch" / self.job_id).resolve()

    def start_clock(self) -> None:
        """The time limit counts from here (the first step, after loading and restoring)."""
        self.deadline = time.monotonic() + self.claim.time_limit_s

    def should_stop(self) -> bool:
        """Polled between steps and batches: cancel, preempt, a lost lease or the time limit."""
        if time.monotonic() > self.deadline:
            self.timed_out.set()
        return self.lease.should_stop or self.reporter.lost or self.timed_out.is_set()


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: what `lifecycle.finish_run` records for the attempt."""

    end: RunEnd
    kind: str | None = None  # a failure's kind (invalid_spec, numerical, timeout, internal...)
    message: str | None = None  # a failure's message, for the user
    steps: int | None = None  # the steps done when it ended (None: it never trained)
    report: dict[str, Any] | None = None  # the performance report, when one was made

    @classmethod
    def failed(
        cls,
        kind: str,
        message: str,
        *,
        steps: int | None = None,
        report: dict[str, Any] | None = None,
    ) -> RunOutcome:
        return cls(RunEnd.FAILED, kind, message, steps, report)

    @property
    def error(self) -> tuple[str, str] | None:
        """(kind, message) of a failure, as the services store it; None otherwise."""
        if self.kind is None:
            return None
        return self.kind, self.message or ""
