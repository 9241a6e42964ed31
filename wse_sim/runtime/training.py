"""The training loop the wafer worker runs: steps, NaN stop, checkpoints and resume."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np

from wse_sim.runtime.checkpoint import save_checkpoint
from wse_sim.runtime.job import LoadedJob, StepResult


@dataclass(frozen=True)
class StepRecord(StepResult):
    """One finished step, as the worker streams it: the metrics row of docs/contract.md (the step's
    `StepResult` and its number)."""

    step: int = field(kw_only=True)


class TrainStatus(StrEnum):
    """How a training run ended."""

    SUCCEEDED = "succeeded"  # every step done
    STOPPED = "stopped"  # should_stop said so (cancel, preemption, time limit, lost lease)
    NUMERICAL = "numerical"  # a non-finite loss with stop_on_nan


@dataclass(frozen=True)
class TrainOutcome:
    """How the run ended (`TrainStatus`).

    last_step: the last step executed (-1 if none); last_checkpoint_step: steps done at the
    newest checkpoint written in this run (None if none); message: why it stopped, for humans.
    """

    status: TrainStatus
    last_step: int
    last_checkpoint_step: int | None
    message: str = ""


def train(
    job: LoadedJob,
    batches: Iterator[tuple[np.ndarray, np.ndarray]],
    *,
    start_step: int,
    total_steps: int,
    checkpoint_every: int | None,
    checkpoint_dir: Path | None,
    stop_on_nan: bool,
    on_step: Callable[[StepRecord], None],
    should_stop: Callable[[], bool],
    steps_done_offset: int = 0,
) -> TrainOutcome:
    """Run steps start_step .. total_steps-1, one batch each from `batches` (batches of those steps).

    A checkpoint is written after every `checkpoint_every`-th step (state with k steps done is
    checkpoint k). A non-finite loss with stop_on_nan ends the run with status "numerical" before
    the step's update is checkpointed. `should_stop()` is polled before every step ("stopped").
    `steps_done_offset`: updates applied before this job's step 0 (a job started from another
    job's checkpoint), so the optimizer's step count continues from there.
    """
    job.steps_done = start_step + steps_done_offset
    last_step, last_ckpt = start_step - 1, None
    for step in range(start_step, total_steps):
        if should_stop():
            return TrainOutcome(
                TrainStatus.STOPPED, last_step, last_ckpt, f"stopped before step {step}"
            )
        try:
            inputs, targets = next(batches)
        except StopIteration:
            return TrainOutcome(
                TrainStatus.STOPPED,
                last_step,
                last_ckpt,
                f"the batch source ended before step {step}",
            )
        with np.errstate(all="ignore"):
            result = job.step(inputs, targets)
        last_step = step
        on_step(StepRecord(**vars(result), step=step))
        if stop_on_nan and not math.isfinite(result.loss):
            return TrainOutcome(
                TrainStatus.NUMERICAL,
                step,
                last_ckpt,
                f"loss became {result.loss} at step {step}; check that step's batch for NaN/inf "
                "values, lower the learning rate, or disable fp16",
            )
        if checkpoint_every and checkpoint_dir is not None and (step + 1) % checkpoint_every == 0:
            save_checkpoint(checkpoint_dir, step + 1, job.state_dict())
            last_ckpt = step + 1
    return TrainOutcome(TrainStatus.SUCCEEDED, last_step, last_ckpt)
