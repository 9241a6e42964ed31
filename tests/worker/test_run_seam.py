"""The worker's run seam: what stops a run (RunContext.should_stop) and what a run reports back
(RunOutcome), with the real LeaseKeeper and StepReporter (no database is reached: the lease is
not entered, the reporter not flushed)."""

from __future__ import annotations

import time
from pathlib import Path

from sam_domain.run import RunOptions
from sam_server.config import Settings
from sam_server.services.lifecycle import Claim
from sam_server.states import RunEnd
from sam_worker.lease import LeaseKeeper
from sam_worker.run import RunContext, RunOutcome
from sam_worker.steps import StepReporter


def _context(tmp_path: Path, time_limit_s: int) -> RunContext:
    claim = Claim(
        job_id="j1",
        attempt=1,
        spec={"run_options": {"stop_on_nan": False}},
        files={},
        rows=4,
        cols=4,
        region=(2, 3, 4, 4),
        compile_key="k",
        time_limit_s=time_limit_s,
        total_steps=10,
    )
    lease = LeaseKeeper("sqlite://", "j1", "w", lease_s=30, every_s=5)
    reporter = StepReporter(
        "sqlite://", "j1", "w", 1, tmp_path, every_s=3600, settings=Settings(data_dir=tmp_path)
    )
    return RunContext(claim, Settings(data_dir=tmp_path), "w", lease, reporter, tmp_path / "ck")


def test_the_time_limit_counts_from_the_first_step_and_stops_the_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path, time_limit_s=0)
    time.sleep(0.01)
    assert not ctx.should_stop()  # loading and restoring are not charged
    ctx.start_clock()
    time.sleep(0.01)
    assert ctx.should_stop() and ctx.timed_out.is_set()


def test_cancel_preempt_and_a_lost_lease_or_reporter_stop_the_run(tmp_path: Path) -> None:
    for flag in ("cancel", "preempt", "lost"):
        ctx = _context(tmp_path, time_limit_s=3600)
        ctx.start_clock()
        assert not ctx.should_stop()
        setattr(ctx.lease, flag, True)
        assert ctx.should_stop() and not ctx.timed_out.is_set(), flag
    ctx = _context(tmp_path, time_limit_s=3600)
    ctx.reporter.lost = True  # its steps could not be written: the attempt is not ours anymore
    assert ctx.should_stop()


def test_the_context_names_the_claims_job_region_options_and_scratch(tmp_path: Path) -> None:
    ctx = _context(tmp_path, time_limit_s=60)
    assert (ctx.job_id, ctx.region, ctx.run_opts) == (
        "j1",
        (2, 3, 4, 4),
        RunOptions(stop_on_nan=False),
    )
    assert ctx.workdir == (tmp_path / "scratch" / "j1").resolve()


def test_an_outcome_carries_its_error_as_the_services_store_it() -> None:
    failed = RunOutcome.failed("timeout", "ran past 5s", steps=3)
    assert (failed.end, failed.error, failed.steps) == (
        RunEnd.FAILED,
        ("timeout", "ran past 5s"),
        3,
    )
    assert RunOutcome(RunEnd.PREEMPTED, steps=4).error is None
