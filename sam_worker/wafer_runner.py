"""A wafer worker's side of a job: claim it, load its artifact into its region of this worker's
simulated wafer, train with progress streamed to the database, checkpoint, and finish."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from compiler.errors import ArtifactCorrupt, ArtifactInvalid, HostOOM
from sam_domain.run import RunSpec
from sam_server.config import Settings, get_settings
from sam_server.db.session import session_scope
from sam_server.errors import SamError
from sam_server.services import lifecycle, results
from sam_server.states import RunEnd
from sam_worker.compile_runner import artifact_root, job_datasets, job_project
from sam_worker.identity import WORKER_ID
from sam_worker.job_outputs import model_weights, resolve_init_from, save_weights
from sam_worker.lease import LeaseKeeper
from sam_worker.prefetch import InputTimeline, PrefetchLoader
from sam_worker.run import RunContext, RunOutcome
from sam_worker.steps import StepReporter
from sam_worker.wafer_host import WaferHost, host

TYPE_CHECKING = False
if TYPE_CHECKING:  # the compiler's and the simulator's runtime import only where a job runs
    from compiler.artifact import Artifact
    from wse_sim.runtime.job import LoadedJob
    from wse_sim.runtime.training import TrainOutcome

log = logging.getLogger("sam.worker.wafer")


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
            lease_s=settings.worker.lease_s,
        )
    if claim is None:
        return "skipped"
    with LeaseKeeper(
        url, job_id, owner, lease_s=settings.worker.lease_s, every_s=settings.worker.heartbeat_s
    ) as lease:
        outcome = _train(claim, settings, wafer, owner, lease)
    with session_scope(url) as session:
        state = lifecycle.finish_run(
            session,
            job_id=job_id,
            owner=owner,
            attempt=attempt,
            outcome=outcome.end,
            error=outcome.error,
            report=outcome.report,
        )
    log.info("job %s attempt %d: %s", job_id, attempt, state or "lease lost")
    return state or "lost"


def _train(
    claim: lifecycle.Claim, settings: Settings, wafer: WaferHost, owner: str, lease: LeaseKeeper
) -> RunOutcome:
    from wse_sim.errors import SramCapacityError

    url = settings.resolved_database_url
    ckpt_dir = results.checkpoint_dir(
        settings.data_dir, job_id=claim.job_id, tenant=claim.tenant, spec=claim.spec
    )
    run_spec = RunSpec.of(claim.spec)
    reporter = StepReporter(
        url,
        claim.job_id,
        owner,
        claim.attempt,
        ckpt_dir,
        settings=settings,
        checkpoint_every=run_spec.run.checkpoint_interval,
        run_opts=run_spec.run,
        timeline=_input_timeline(run_spec),
    )
    reporter.step_counter = wafer.steps
    reporter.flush_timer = wafer.checkpoint_seconds
    claim, error = _artifact_for_region(claim, settings)
    if error is not None:
        return RunOutcome.failed(*error)
    ctx = RunContext(claim, settings, owner, lease, reporter, ckpt_dir)
    artifact_dir = artifact_root(settings) / (claim.compile_key or "")
    run_key = f"{claim.job_id}/{owner}"
    try:
        artifact, planned = _checked_artifact(artifact_dir, claim, settings, wafer, ctx)
        # The plan's bytes are this run's alone while it runs (sam_worker.host_memory).
        wafer.memory.reserve(run_key, planned, waiting=lambda why: _say(reporter, why))
    except ArtifactCorrupt as exc:
        return _set_aside(url, artifact_dir, claim, exc)
    except (ArtifactInvalid, HostOOM) as exc:  # the trusted check refused it: never run
        log.error("job %s: %s: %s", claim.job_id, exc.kind, exc.message)
        reporter.line(f"the artifact was not run: {exc.message}", "ERROR")
        reporter.flush()
        return RunOutcome.failed(exc.kind, exc.message)
    except Exception as exc:  # noqa: BLE001 - a bad artifact fails this job, not the worker
        log.exception("checking %s failed", claim.job_id)
        return RunOutcome.failed(_failure_kind(exc), f"loading the artifact failed: {exc}")
    try:
        try:
            job = wafer.load(artifact, ctx)
        except Exception as exc:  # noqa: BLE001 - a bad artifact fails this job, not the worker
            log.exception("loading %s failed", claim.job_id)
            sram = isinstance(exc, SramCapacityError)
            kind = _failure_kind(exc, "compile_oom" if sram else None)
            return RunOutcome.failed(kind, f"loading the artifact failed: {exc}")
        try:
            return _run_steps(ctx, job)
        finally:
            wafer.release(ctx, job)
    finally:
        wafer.memory.release(run_key)


def _say(reporter: StepReporter, line: str) -> None:
    """A line in the job's log now (not at the next step's flush): the user sees why it waits."""
    reporter.line(line)
    reporter.flush()


def _checked_artifact(
    artifact_dir: Path,
    claim: lifecycle.Claim,
    settings: Settings,
    wafer: WaferHost,
    ctx: RunContext,
) -> tuple[Artifact, int]:
    """The job's artifact and the host bytes its steps plan to hold, once its hashes match and the trusted side has checked what it would
    run (`compiler.artifact_check`: shapes re-derived, kernels, SRAM and host bytes planned):
    it came out of the compile sandbox, where tenant code could have written anything."""
    import compiler
    from compiler.artifact_check import check_artifact, check_files

    bound = settings.worker.wafer_job_memory_bytes
    check_files(artifact_dir, bound)
    artifact = compiler.load_artifact(artifact_dir, expected_digest=claim.artifact_digest)
    _, _, rows, cols = ctx.region
    checked = check_artifact(artifact, rows=rows, cols=cols, arch=wafer.arch, max_host_bytes=bound)
    log.info(
        "job %s: artifact checked (%d ops, %.0f MiB of host memory planned)",
        claim.job_id,
        checked.nodes,
        checked.host_bytes / 2**20,
    )
    return artifact, int(checked.host_bytes)


def _failure_kind(exc: BaseException, default: str | None = None) -> str:
    """A run's failure kind: host_oom when the host ran out of memory (the worker's RLIMIT_DATA,
    SAM_WAFER_WORKER_MEMORY_BYTES, or the machine's), the error's own kind, else internal."""
    if isinstance(exc, MemoryError):
        return "host_oom"
    return default or str(getattr(exc, "kind", "internal"))


def _set_aside(
    url: str, artifact_dir: Path, claim: lifecycle.Claim, exc: ArtifactCorrupt
) -> RunOutcome:
    """A corrupt artifact is never run: move it aside, stop reuse of it, fail with its kind."""
    from compiler.integrity import quarantine

    log.error("job %s: %s", claim.job_id, exc)
    quarantine(artifact_dir)
    with session_scope(url) as session:
        lifecycle.forget_artifact(session, compile_key=claim.compile_key or "")
    return RunOutcome.failed("artifact_corrupt", getattr(exc, "message", str(exc)))


def _input_timeline(spec: RunSpec) -> InputTimeline | None:
    """The input-wait model for a make_batch source. Synthetic data stands in for a data set
    the input servers stream at line rate, so its host time is not charged to the wafer (it
    would make simulated figures depend on the simulator host's load)."""
    if spec.data_source not in ("file", "script"):
        return None
    return InputTimeline(
        depth=spec.loading.prefetch_depth, parallel=spec.loading.use_parallel_loader
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
        "job %s: artifact for its %dx%d region: %s", claim.job_id, rows, cols, result.cache_key
    )
    digest = result.summary.get("artifact_sha256") if result.summary else None
    return replace(claim, compile_key=result.cache_key, artifact_digest=digest), None


def _run_steps(ctx: RunContext, job: LoadedJob) -> RunOutcome:
    """Train the loaded `job` from where its checkpoints (or init_from) say, to its last step."""
    import compiler
    from wse_sim import runtime

    claim, reporter = ctx.claim, ctx.reporter
    try:
        start_step, offset = _restore(ctx, job)
    except ValueError as exc:  # init_from names a missing or mismatched checkpoint
        reporter.flush()
        return RunOutcome.failed("invalid_spec", str(exc))
    reporter.clock_hz = job.clock_hz
    total = claim.total_steps  # set at submit from num_epochs x steps_per_epoch
    reporter.line(f"attempt {claim.attempt} starts at step {start_step} of {total}")
    ctx.start_clock()
    workdir = ctx.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        datasets = job_datasets(claim, ctx.settings)
        project = job_project(claim, ctx.settings)
    except SamError as exc:  # removed since the submit, or no longer shared with the tenant
        reporter.flush()
        return RunOutcome.failed("invalid_spec", str(exc))
    batches = _prefetched(
        compiler.iter_batches(
            claim.spec,
            claim.files,
            start_step + offset,
            workdir,
            should_stop=ctx.should_stop,
            datasets=datasets,
            project=project,
        ),
        claim.spec,
        reporter,
    )
    try:
        result = runtime.train(
            job,
            batches,
            start_step=start_step,
            total_steps=total,
            checkpoint_every=reporter.checkpoint_every,
            checkpoint_dir=ctx.ckpt_dir,
            stop_on_nan=ctx.run_opts.stop_on_nan,
            on_step=reporter.on_step,
            should_stop=ctx.should_stop,
            steps_done_offset=offset,
        )
    except Exception as exc:  # noqa: BLE001 - a failing run fails this job, not the worker
        reporter.flush()
        # The user's make_batch fails as compiler.errors.ModelError (kind "model_error").
        kind = _failure_kind(exc)
        if kind == "host_oom":
            return RunOutcome.failed(
                kind,
                "the step ran out of host memory (the wafer worker's limit, "
                "SAM_WAFER_WORKER_MEMORY_BYTES, or the machine's); use a smaller batch_size "
                "or model",
            )
        return RunOutcome.failed(kind, f"{type(exc).__name__}: {exc}")
    finally:
        batches.close()
    return _outcome(ctx, result, job)


def _resume(
    job: LoadedJob, claim: lifecycle.Claim, ckpt_dir: Path, reporter: StepReporter
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


def _restore(ctx: RunContext, job: LoadedJob) -> tuple[int, int]:
    """Load the job's own newest checkpoint (as _resume checks it), else the one
    run_options.init_from names (checked against the hash written beside it).

    Returns (first step to run, updates applied before this job's step 0): a job started from
    another job's checkpoint of step N keeps N updates, so its optimizer and its batches
    (make_batch(N + k)) continue as that job resumed would.
    """
    from wse_sim import runtime

    claim, settings, reporter = ctx.claim, ctx.settings, ctx.reporter
    resumed = _resume(job, claim, ctx.ckpt_dir, reporter) if reporter.checkpoint_every else None
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
    loading = RunSpec.of(spec).loading
    loader = PrefetchLoader(
        batches, depth=loading.prefetch_depth, parallel=loading.use_parallel_loader
    )
    reporter.loader_load_s = lambda: loader.last_load_s
    return loader


def _outcome(ctx: RunContext, result: TrainOutcome, job: LoadedJob) -> RunOutcome:
    """Save what a finished run leaves (final weights, a preemption checkpoint, the performance
    report) and say how it ended."""
    from wse_sim import runtime
    from wse_sim.runtime.training import TrainStatus

    claim, settings, reporter, lease = ctx.claim, ctx.settings, ctx.reporter, ctx.lease
    report = None
    if result.status == TrainStatus.SUCCEEDED:
        try:
            path = results.weights_path(settings.data_dir, claim.job_id)
            save_weights(model_weights(job), path)
        except OSError as exc:  # the training succeeded; say what is missing instead of losing it
            reporter.line(f"writing the final weights failed: {exc}", "ERROR")
    if result.status == TrainStatus.STOPPED and lease.preempt and reporter.checkpoint_every:
        runtime.save_checkpoint(ctx.ckpt_dir, result.last_step + 1, job.state_dict())
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
    steps = result.last_step + 1
    if result.status == TrainStatus.SUCCEEDED:
        return RunOutcome(RunEnd.SUCCEEDED, steps=steps, report=report)
    if result.status == TrainStatus.NUMERICAL:
        return RunOutcome.failed("numerical", result.message, steps=steps, report=report)
    if lease.lost or reporter.lost:
        return RunOutcome(RunEnd.LOST, steps=steps)
    if lease.cancel:
        return RunOutcome(RunEnd.CANCELLED, steps=steps, report=report)
    if lease.preempt:
        return RunOutcome(RunEnd.PREEMPTED, steps=steps, report=report)
    if ctx.timed_out.is_set():
        return RunOutcome.failed(
            "timeout",
            f"the job ran past its time_limit of {claim.time_limit_s}s; "
            "raise resources.time_limit or train fewer steps",
            steps=steps,
            report=report,
        )
    return RunOutcome.failed(
        "internal", result.message or "the run stopped", steps=steps, report=report
    )


def _warn_if_input_bound(reporter: StepReporter, summary: dict[str, Any]) -> None:
    if summary["bound"] == "input-bound":
        reporter.line(
            f"input-bound: the wafer waited for data {100 * summary['input_wait_fraction']:.0f}% "
            f"of the simulated time (x{summary['input_slowdown']:.2f} slower than compute alone); raise data_loading.prefetch_depth, set use_parallel_loader, "
            "or make make_batch faster",
            "WARNING",
        )
