"""A wafer worker's side of a job: claim it, load its artifact into its region of this worker's
simulated wafer, train with progress streamed to the database, checkpoint, and finish."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from sam_server.config import Settings, get_settings
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from sam_worker.compile_runner import artifact_root
from sam_worker.identity import WORKER_ID
from sam_worker.lease import LeaseKeeper
from sam_worker.wafer_host import host

log = logging.getLogger("sam.worker.wafer")


class StepReporter:
    """Buffers per-step records and log lines; writes them at most every `every_s` seconds."""

    def __init__(
        self,
        url: str,
        job_id: str,
        owner: str,
        attempt: int,
        ckpt_dir: Path,
        every_s: float = 0.25,
        checkpoint_every: int | None = None,
    ) -> None:
        self.url, self.job_id, self.owner, self.attempt = url, job_id, owner, attempt
        self.checkpoint_every = checkpoint_every
        self.ckpt_dir, self.every_s = ckpt_dir, every_s
        self.steps: list[dict[str, Any]] = []
        self.lines: list[tuple[str, str]] = []
        self.last_flush = time.monotonic()
        self.lost = False
        self.noted_ckpt: int | None = None
        scale = get_settings()
        self.log_every, self.keep_checkpoints = scale.log_every_steps, scale.checkpoint_keep
        self.keep_recent, self.chunk_steps = scale.metrics_recent_steps, scale.metrics_chunk_steps

    def on_step(self, rec: Any) -> None:
        loss = float(rec.loss)
        self.steps.append(
            {
                "step": rec.step,
                "loss": loss,
                "sim_cycles": int(rec.sim_cycles),
                "samples_per_sec": float(rec.samples_per_sec),
            }
        )
        # A line every `log_every` steps, not every step: a million-step job must not write a
        # million log rows. Every step's numbers stay in `sam metrics`.
        if rec.step % self.log_every == 0:
            self.lines.append(
                (
                    "INFO",
                    f"step {rec.step}: loss {loss:.6g}, {int(rec.sim_cycles)} cycles, "
                    f"{rec.samples_per_sec:.4g} samples/s (simulated)",
                )
            )
        # The runtime writes checkpoint k right after step k-1's callback: every step before it
        # must be in the database first, or a crash after the checkpoint would lose those steps'
        # metrics (the next attempt resumes at k and never recomputes them).
        at_checkpoint = bool(self.checkpoint_every) and (rec.step + 1) % self.checkpoint_every == 0
        if at_checkpoint or time.monotonic() - self.last_flush >= self.every_s:
            self.flush()

    def line(self, text: str, level: str = "INFO") -> None:
        self.lines.append((level, text))

    def flush(self) -> None:
        from wse_sim.runtime import latest_checkpoint, prune_checkpoints

        steps, lines = self.steps, self.lines
        self.steps, self.lines = [], []
        self.last_flush = time.monotonic()
        newest = latest_checkpoint(self.ckpt_dir)
        with session_scope(self.url) as session:
            ok = lifecycle.record_steps(
                session,
                job_id=self.job_id,
                owner=self.owner,
                attempt=self.attempt,
                steps=steps,
                lines=lines,
                keep_recent=self.keep_recent,
                chunk_steps=self.chunk_steps,
            )
            if ok and newest is not None and newest[0] != self.noted_ckpt:
                lifecycle.note_checkpoint(
                    session, job_id=self.job_id, owner=self.owner, step=newest[0]
                )
                self.noted_ckpt = newest[0]
                prune_checkpoints(self.ckpt_dir, self.keep_checkpoints)
        self.lost = self.lost or not ok


def run_on_wafer(job_id: str, attempt: int) -> str:
    """The body of the `sam.run` task."""
    settings = get_settings()
    url = settings.resolved_database_url
    wafer = host()
    owner = f"wafer:{wafer.wafer_id}:{WORKER_ID}:{attempt}"
    with session_scope(url) as session:
        claim = lifecycle.claim_run(
            session,
            job_id=job_id,
            attempt=attempt,
            wafer_id=wafer.wafer_id,
            owner=owner,
            lease_s=settings.lease_s,
        )
    if claim is None:
        return "skipped"
    with LeaseKeeper(
        url, job_id, owner, lease_s=settings.lease_s, every_s=settings.heartbeat_s
    ) as lease:
        outcome, error, report = _train(claim, settings, wafer, owner, lease)
    with session_scope(url) as session:
        state = lifecycle.finish_run(
            session,
            job_id=job_id,
            owner=owner,
            attempt=attempt,
            outcome=outcome,
            error=error,
            report=report,
        )
    log.info("job %s attempt %d: %s", job_id, attempt, state or "lease lost")
    return state or "lost"


def _train(
    claim: lifecycle.Claim, settings: Settings, wafer: Any, owner: str, lease: LeaseKeeper
) -> tuple[str, tuple[str, str] | None, dict[str, Any] | None]:
    import compiler

    url = settings.resolved_database_url
    ckpt_dir = (settings.data_dir / "checkpoints" / claim.job_id).resolve()
    run_opts = claim.spec.get("run_options") or {}
    reporter = StepReporter(
        url,
        claim.job_id,
        owner,
        claim.attempt,
        ckpt_dir,
        checkpoint_every=_checkpoint_every(run_opts),
    )
    artifact_dir = artifact_root(settings) / (claim.compile_key or "")
    try:
        artifact = compiler.load_artifact(artifact_dir)
        job = wafer.load(artifact, claim.region, owner=claim.job_id)
    except Exception as exc:  # noqa: BLE001 - a bad artifact fails this job, not the worker
        log.exception("loading %s failed", claim.job_id)
        kind = "compile_oom" if type(exc).__name__ == "SramCapacityError" else "internal"
        return "failed", (kind, f"loading the artifact failed: {exc}"), None
    try:
        return _run_steps(claim, settings, job, reporter, lease, ckpt_dir, run_opts)
    finally:
        wafer.release(claim.job_id, job)


def _checkpoint_every(run_opts: dict[str, Any]) -> int | None:
    """Steps between checkpoints, or None when the job has checkpoints disabled."""
    if not run_opts.get("checkpoint_enabled", True):
        return None
    return int(run_opts.get("checkpoint_every", 0)) or None


def _run_steps(claim, settings, job, reporter, lease, ckpt_dir, run_opts):  # type: ignore[no-untyped-def]
    import compiler
    from wse_sim import runtime

    start_step = 0
    if reporter.checkpoint_every:
        newest = runtime.latest_checkpoint(ckpt_dir)
        if newest is not None:
            job.load_state_dict(runtime.load_checkpoint(newest[1]))
            start_step = newest[0]
            reporter.line(f"resuming from the checkpoint of step {start_step}")
    total = claim.total_steps  # set at submit from num_epochs x steps_per_epoch
    reporter.line(f"attempt {claim.attempt} starts at step {start_step} of {total}")
    deadline = time.monotonic() + claim.time_limit_s
    timed_out = threading.Event()

    def should_stop() -> bool:
        if time.monotonic() > deadline:
            timed_out.set()
        return lease.should_stop or reporter.lost or timed_out.is_set()

    workdir = (settings.data_dir / "scratch" / claim.job_id).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    batches = compiler.iter_batches(claim.spec, claim.files, start_step, workdir)
    try:
        result = runtime.train(
            job,
            batches,
            start_step=start_step,
            total_steps=total,
            checkpoint_every=reporter.checkpoint_every,
            checkpoint_dir=ckpt_dir,
            stop_on_nan=bool(run_opts.get("stop_on_nan", True)),
            on_step=reporter.on_step,
            should_stop=should_stop,
        )
    except Exception as exc:  # noqa: BLE001 - a failing run fails this job, not the worker
        reporter.flush()
        # The user's make_batch fails as compiler.errors.ModelError (kind "model_error").
        kind = getattr(exc, "kind", "internal")
        return "failed", (kind, f"{type(exc).__name__}: {exc}"), None
    finally:
        close = getattr(batches, "close", None)
        if close:
            close()
    return _outcome(result, job, reporter, lease, timed_out, ckpt_dir, settings, claim)


def _outcome(result, job, reporter, lease, timed_out, ckpt_dir, settings, claim):  # type: ignore[no-untyped-def]
    from wse_sim import runtime

    report = None
    if result.status == "stopped" and lease.preempt and reporter.checkpoint_every:
        runtime.save_checkpoint(ckpt_dir, result.last_step + 1, job.state_dict())
        reporter.line(f"checkpointed at step {result.last_step + 1} for preemption")
    try:
        from wse_sim.report import region_summary

        report = runtime.report(job, (settings.data_dir / "reports" / claim.job_id).resolve())
        report["region"] = region_summary(job.region)  # per-PE grids (downsampled) for dashboards
    except Exception as exc:  # noqa: BLE001 - a report failure must not lose the run
        reporter.line(f"the performance report failed: {exc}", "WARN")
    reporter.flush()
    if result.status == "succeeded":
        return "succeeded", None, report
    if result.status == "numerical":
        return "failed", ("numerical", result.message), report
    if lease.lost or reporter.lost:
        return "lost", None, None
    if lease.cancel:
        return "cancelled", None, report
    if lease.preempt:
        return "preempted", None, report
    if timed_out.is_set():
        return (
            "failed",
            (
                "timeout",
                f"the job ran past its time_limit of {claim.time_limit_s}s; "
                "raise resources.time_limit or train fewer steps",
            ),
            report,
        )
    return "failed", ("internal", result.message or "the run stopped"), report
