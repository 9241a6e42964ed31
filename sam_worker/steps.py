"""A run's progress on its way to the database: `StepReporter` buffers each step's numbers and
log lines and writes them (with the newest checkpoint) at most every `every_s` seconds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.exc import OperationalError

from sam_domain.run import RunOptions
from sam_server.config import Settings
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from sam_worker.job_outputs import EpochTracker, shown
from sam_worker.prefetch import InputTimeline

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
        *,
        settings: Settings,
        checkpoint_every: int | None = None,
        run_opts: RunOptions | None = None,
        timeline: InputTimeline | None = None,
    ) -> None:
        self.url, self.job_id, self.owner, self.attempt = url, job_id, owner, attempt
        self.checkpoint_every = checkpoint_every
        run_opts = run_opts or RunOptions(steps_per_epoch=1)
        self.log_level = run_opts.log_level
        self.epochs = EpochTracker(run_opts.steps_per_epoch, run_opts.num_epochs)
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
        scale = settings
        self.log_every, self.keep_checkpoints = (
            scale.worker.log_every_steps,
            scale.storage.checkpoint_keep,
        )
        if run_opts.checkpoint_dir:
            self.keep_checkpoints = 0  # the user named where they go: the user's to keep
        self.keep_recent, self.chunk_steps = (
            scale.storage.metrics_recent_steps,
            scale.storage.metrics_chunk_steps,
        )
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
