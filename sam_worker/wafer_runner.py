"""A wafer worker's side of a job: claim it, load its artifact into its region of this worker's
simulated wafer, train with progress streamed to the database, checkpoint, and finish."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import OperationalError

from compiler.errors import ArtifactCorrupt
from sam_server.config import Settings, get_settings
from sam_server.db.session import session_scope
from sam_server.services import lifecycle, results
from sam_worker.compile_runner import artifact_root
from sam_worker.identity import WORKER_ID
from sam_worker.job_outputs import (
    EpochTracker,
    model_weights,
    resolve_init_from,
    save_weights,
    shown,
)
from sam_worker.lease import LeaseKeeper
from sam_worker.prefetch import InputTimeline, PrefetchLoader
from sam_worker.wafer_host import host

if TYPE_CHECKING:  # imported where used: the simulator is heavy
    from wse_sim.runtime import LoadedJob, TrainOutcome

# (terminal state, (error kind, message) when failed, performance report when there is one)
Outcome = tuple[str, tuple[str, str] | None, dict[str, Any] | None]

log = logging.getLogger("sam.worker.wafer")


class StepReporter:
    """Buffers per-step records and log lines; writes them at most every `every_s` seconds."""

    loader_load_s: Callable[[], float]  # the last batch's load time, from the job's loader

    def __init__(
        self,
        url: str,
        job_id: str,
        owner: str,
        attempt: int,
        ckpt_dir: Path,
        every_s: float = 0.25,
        checkpoint_every: int | None = None,
        run_opts: dict[str, Any] | None = None,
        timeline: InputTimeline | None = None,
    ) -> None:
        self.url, self.job_id, self.owner, self.attempt = url, job_id, owner, attempt
        self.checkpoint_every = checkpoint_every
        run_opts = run_opts or {}
        self.log_level = str(run_opts.get("log_level") or "INFO")
        self.epochs = EpochTracker(
            int(run_opts.get("steps_per_epoch") or 1), int(run_opts.get("num_epochs") or 1)
        )
        # The loader and its timeline: the wafer's wait for input is charged to each step.
        self.timeline, self.loader_load_s = timeline, (lambda: 0.0)
        self.clock_hz = 850e6  # the loaded job's arch clock, set before training
        self.ckpt_dir, self.every_s = ckpt_dir, every_s
        self.steps: list[dict[str, Any]] = []
        self.lines: list[tuple[str, str]] = []
        self.last_flush = time.monotonic()
        self.lost = False
        self.noted_ckpt: int | None = None
        self.max_step = -1  # the highest step this attempt has run
        scale = get_settings()
        self.log_every, self.keep_checkpoints = scale.log_every_steps, scale.checkpoint_keep
        if run_opts.get("checkpoint_dir"):
            self.keep_checkpoints = 0  # the user named where they go: the user's to keep
        self.keep_recent, self.chunk_steps = scale.metrics_recent_steps, scale.metrics_chunk_steps
        self.step_counter: Any = None  # this wafer's steps counter (Prometheus), when set
        self.flush_timer: Any = None  # this wafer's checkpoint/flush histogram, when set

    def on_step(self, rec: Any) -> None:
        if self.step_counter is not None:
            self.step_counter.inc()
        loss = float(rec.loss)
        self.max_step = max(self.max_step, int(rec.step))
        cycles, per_s = self._with_input_wait(rec)
        accuracy = getattr(rec, "accuracy", None)
        self.steps.append(
            {
                "step": rec.step,
                "loss": loss,
                "sim_cycles": cycles,
                "samples_per_sec": per_s,
                "accuracy": accuracy,
            }
        )
        # Every step at DEBUG (the job's log_level decides), and at INFO only every `log_every`
        # steps: a million-step job must not write a million log rows. Every step's numbers
        # stay in `sam metrics`.
        self.line(
            f"step {rec.step}: loss {loss:.6g}, {cycles} cycles, "
            f"{per_s:.4g} samples/s (simulated)"
            + (f", accuracy {100 * accuracy:.1f}%" if accuracy is not None else ""),
            "INFO" if rec.step % self.log_every == 0 else "DEBUG",
        )
        summary = self.epochs.add(rec.step, loss, accuracy)
        if summary:
            self.line(summary)
        if getattr(rec, "skipped", False):
            self.line(
                f"step {rec.step}: inf/nan gradients, update skipped; "
                f"loss scale lowered to {rec.loss_scale:g}",
                "WARNING",
            )
        # The runtime writes checkpoint k right after step k-1's callback: every step before it
        # must be in the database first, or a crash after the checkpoint would lose those steps'
        # metrics (the next attempt resumes at k and never recomputes them).
        at_checkpoint = bool(self.checkpoint_every) and (rec.step + 1) % self.checkpoint_every == 0
        if at_checkpoint or time.monotonic() - self.last_flush >= self.every_s:
            self.flush()

    def _with_input_wait(self, rec: Any) -> tuple[int, float]:
        """The step's cycles and samples/s once its wait for input (if any) is charged."""
        cycles, per_s = int(rec.sim_cycles), float(rec.samples_per_sec)
        if self.timeline is None or cycles <= 0 or per_s <= 0:
            return cycles, per_s
        clock_hz = self.clock_hz
        wait_s = self.timeline.step(self.loader_load_s(), cycles / clock_hz)
        waited = cycles + int(round(wait_s * clock_hz))
        return waited, per_s * cycles / waited

    def line(self, text: str, level: str = "INFO") -> None:
        """Queue a log line if the job's log_level shows `level`."""
        if shown(level, self.log_level):
            self.lines.append((level, text))

    def flush(self) -> None:
        steps, lines = self.steps, self.lines
        self.steps, self.lines = [], []
        self.last_flush = began = time.monotonic()
        newest = self._own_newest_checkpoint()
        for wait_s in (1.0, 2.0, 4.0, 8.0, None):
            try:
                ok = self._write(steps, lines, newest)
                break
            except OperationalError as exc:
                # SQLite: every worker thread, the scheduler and the API share one writer lock;
                # under load a write can wait past busy_timeout. The transaction rolled back,
                # so writing the same steps again is safe; give up only after ~15 s more.
                if wait_s is None or "locked" not in str(exc):
                    raise
                log.warning("%s: database busy while recording steps; retrying", self.job_id)
                time.sleep(wait_s)
        self.lost = self.lost or not ok
        if self.flush_timer is not None:
            self.flush_timer.observe(time.monotonic() - began)

    def _write(
        self,
        steps: list[dict[str, Any]],
        lines: list[tuple[str, str]],
        newest: tuple[int, str | None] | None,
    ) -> bool:
        """One transaction: the buffered steps and lines, and the newest checkpoint if new."""
        from wse_sim.runtime import prune_checkpoints

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
            noted = ok and newest is not None and newest[0] != self.noted_ckpt
            if noted and newest is not None:
                lifecycle.note_checkpoint(
                    session, job_id=self.job_id, owner=self.owner, step=newest[0], sha256=newest[1]
                )
        if noted and newest is not None:  # committed: older checkpoints may go
            self.noted_ckpt = newest[0]
            prune_checkpoints(self.ckpt_dir, self.keep_checkpoints)
        return ok

    def _own_newest_checkpoint(self) -> tuple[int, str | None] | None:
        """(step, sha256) of the newest checkpoint this attempt can have written (never one of a
        step it has not reached: such a file was put there by someone else)."""
        from wse_sim import runtime

        for step, path in runtime.list_checkpoints(self.ckpt_dir):
            if step <= self.max_step + 1:
                return step, runtime.checkpoint_sha256(path)
        return None


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
) -> Outcome:
    import compiler

    url = settings.resolved_database_url
    ckpt_dir = results.checkpoint_dir(
        settings.data_dir, job_id=claim.job_id, tenant=claim.tenant, spec=claim.spec
    )
    run_opts = claim.spec.get("run_options") or {}
    reporter = StepReporter(
        url,
        claim.job_id,
        owner,
        claim.attempt,
        ckpt_dir,
        checkpoint_every=_checkpoint_every(run_opts),
        run_opts=run_opts,
        timeline=_input_timeline(claim.spec),
    )
    reporter.step_counter = getattr(wafer, "steps", None)
    reporter.flush_timer = getattr(wafer, "checkpoint_seconds", None)
    claim, error = _artifact_for_region(claim, settings)
    if error is not None:
        return "failed", error, None
    artifact_dir = artifact_root(settings) / (claim.compile_key or "")
    try:
        artifact = compiler.load_artifact(artifact_dir, expected_digest=claim.artifact_digest)
        job = wafer.load(artifact, claim.region, owner=claim.job_id)
    except ArtifactCorrupt as exc:
        return "failed", _set_aside(url, artifact_dir, claim, exc), None
    except Exception as exc:  # noqa: BLE001 - a bad artifact fails this job, not the worker
        log.exception("loading %s failed", claim.job_id)
        kind = "compile_oom" if type(exc).__name__ == "SramCapacityError" else "internal"
        return "failed", (kind, f"loading the artifact failed: {exc}"), None
    try:
        return _run_steps(claim, settings, job, reporter, lease, ckpt_dir, run_opts)
    finally:
        wafer.release(claim.job_id, job)


def _set_aside(
    url: str, artifact_dir: Path, claim: lifecycle.Claim, exc: Exception
) -> tuple[str, str]:
    """A corrupt artifact is never run: move it aside, stop reuse of it, fail with its kind."""
    from compiler.integrity import quarantine

    log.error("job %s: %s", claim.job_id, exc)
    quarantine(artifact_dir)
    with session_scope(url) as session:
        lifecycle.forget_artifact(session, compile_key=claim.compile_key or "")
    return ("artifact_corrupt", getattr(exc, "message", str(exc)))


def _input_timeline(spec: dict[str, Any]) -> InputTimeline | None:
    """The input-wait model for a make_batch source. Synthetic data stands in for a data set
    the input servers stream at line rate, so its host time is not charged to the wafer (it
    would make simulated figures depend on the simulator host's load)."""
    if (spec.get("data") or {}).get("source") != "file":
        return None
    loading = spec.get("data_loading") or {}
    return InputTimeline(
        depth=int(loading.get("prefetch_depth", 2)),
        parallel=bool(loading.get("use_parallel_loader", True)),
    )


def _artifact_for_region(
    claim: lifecycle.Claim, settings: Settings
) -> tuple[lifecycle.Claim, tuple[str, str] | None]:
    """The claim with the artifact for the region the scheduler chose: the job's own when the
    shape is the one it asked for; for a flexible job placed in another shape, the compile for
    that shape (a cache hit when the tenant compiled it before), done before the first step,
    with that artifact's digest to check it against."""
    if claim.region is None or (claim.region[2], claim.region[3]) == (claim.rows, claim.cols):
        return claim, None
    from dataclasses import replace

    from sam_worker.compile_runner import run_compile

    rows, cols = claim.region[2], claim.region[3]
    result, error = run_compile(replace(claim, rows=rows, cols=cols), settings)
    if error is not None or result is None:
        return claim, error or ("internal", "the compile for the chosen shape returned nothing")
    log.info(
        "job %s: artifact for its %dx%d region: %s", claim.job_id, rows, cols, result["cache_key"]
    )
    digest = (result.get("summary") or {}).get("artifact_sha256")
    return replace(claim, compile_key=str(result["cache_key"]), artifact_digest=digest), None


def _checkpoint_every(run_opts: dict[str, Any]) -> int | None:
    """Steps between checkpoints, or None when the job has checkpoints disabled."""
    if not run_opts.get("checkpoint_enabled", True):
        return None
    return int(run_opts.get("checkpoint_every", 0)) or None


def _run_steps(
    claim: lifecycle.Claim,
    settings: Settings,
    job: LoadedJob,
    reporter: StepReporter,
    lease: LeaseKeeper,
    ckpt_dir: Path,
    run_opts: dict[str, Any],
) -> Outcome:
    import compiler
    from wse_sim import runtime

    try:
        start_step, offset = _restore(claim, settings, job, reporter, ckpt_dir)
    except ValueError as exc:  # init_from names a missing or mismatched checkpoint
        reporter.flush()
        return "failed", ("invalid_spec", str(exc)), None
    reporter.clock_hz = job.clock_hz
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
    batches = compiler.iter_batches(
        claim.spec, claim.files, start_step + offset, workdir, should_stop=should_stop
    )
    batches = _prefetched(batches, claim.spec, reporter)
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
            steps_done_offset=offset,
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


def _resume(
    job: Any, claim: lifecycle.Claim, ckpt_dir: Path, reporter: StepReporter
) -> tuple[int, int] | None:
    """Load the checkpoint the database names, if it still has the hash recorded when it was
    written; None with none named or a bad one (other files in the folder are never loaded).
    Returns (step to start at, updates applied before the job's step 0; see _restore)."""
    from wse_sim import runtime
    from wse_sim.runtime.checkpoint import CheckpointError, set_aside

    step = claim.checkpoint_step
    if not step:
        return None
    path = ckpt_dir / f"step-{step:08d}.npz"
    try:
        state = runtime.load_checkpoint(path, expected_sha256=claim.checkpoint_sha256)
    except CheckpointError as exc:
        reporter.line(f"checkpoint of step {step} not used: {exc}; starting at step 0", "WARN")
        set_aside(path)
        return None
    job.load_state_dict(state)
    reporter.line(f"resuming from the checkpoint of step {step}")
    return step, int(state.get("_steps_done", step)) - step


def _restore(
    claim: lifecycle.Claim,
    settings: Settings,
    job: LoadedJob,
    reporter: StepReporter,
    ckpt_dir: Path,
) -> tuple[int, int]:
    """Load the job's own newest checkpoint (as _resume checks it), else the one
    run_options.init_from names (checked against the hash written beside it).

    Returns (first step to run, updates applied before this job's step 0): a job started from
    another job's checkpoint of step N keeps N updates, so its optimizer and its batches
    (make_batch(N + k)) continue as that job resumed would.
    """
    from wse_sim import runtime

    resumed = _resume(job, claim, ckpt_dir, reporter) if reporter.checkpoint_every else None
    if resumed is not None:
        return resumed
    source = resolve_init_from(settings.resolved_database_url, settings.data_dir, claim)
    if source is None:
        return 0, 0
    state = runtime.load_checkpoint(source)
    try:
        job.load_state_dict(state)
    except ValueError as exc:
        raise ValueError(
            f"run_options.init_from: {exc}; start from a job of the same model"
        ) from exc
    done = int(state.get("_steps_done", 0))
    reporter.line(f"starting from {source.parent.name}'s checkpoint ({done} updates applied)")
    return 0, done


def _prefetched(
    batches: Iterator[Any], spec: dict[str, Any], reporter: StepReporter
) -> PrefetchLoader:
    """`batches` behind the job's host loader (data_loading); the reporter reads its timings."""
    loading = spec.get("data_loading") or {}
    loader = PrefetchLoader(
        batches,
        depth=int(loading.get("prefetch_depth", 2)),
        parallel=bool(loading.get("use_parallel_loader", True)),
    )
    reporter.loader_load_s = lambda: loader.last_load_s
    return loader


def _outcome(
    result: TrainOutcome,
    job: LoadedJob,
    reporter: StepReporter,
    lease: LeaseKeeper,
    timed_out: threading.Event,
    ckpt_dir: Path,
    settings: Settings,
    claim: lifecycle.Claim,
) -> Outcome:
    from wse_sim import runtime

    report = None
    if result.status == "succeeded":
        try:
            path = results.weights_path(settings.data_dir, claim.job_id)
            save_weights(model_weights(job), path)
        except OSError as exc:  # the training succeeded; say what is missing instead of losing it
            reporter.line(f"writing the final weights failed: {exc}", "ERROR")
    if result.status == "stopped" and lease.preempt and reporter.checkpoint_every:
        runtime.save_checkpoint(ckpt_dir, result.last_step + 1, job.state_dict())
        reporter.line(f"checkpointed at step {result.last_step + 1} for preemption")
    try:
        from wse_sim.report import region_summary

        report = runtime.report(job, (settings.data_dir / "reports" / claim.job_id).resolve())
        report["region"] = region_summary(job.region)  # per-PE grids (downsampled) for dashboards
        if reporter.timeline is not None:
            report["input"] = reporter.timeline.summary()
            _warn_if_input_bound(reporter, report["input"])
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


def _warn_if_input_bound(reporter: StepReporter, summary: dict[str, Any]) -> None:
    if summary["bound"] == "input-bound":
        reporter.line(
            f"input-bound: the wafer waited for data {100 * summary['input_wait_fraction']:.0f}% "
            "of the simulated time; raise data_loading.prefetch_depth, set use_parallel_loader, "
            "or make make_batch faster",
            "WARNING",
        )
