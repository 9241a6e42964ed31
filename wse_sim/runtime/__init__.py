"""wse_sim.runtime: run a compiled training step (a `compiler.artifact.Artifact`) on a wafer region.

Public API (the wafer worker calls these):
    load(artifact, wafer, region_rect: (row, col, rows, cols), owner: str) -> LoadedJob
    LoadedJob.step(inputs, targets) -> StepResult(loss, sim_cycles, samples_per_sec)
    LoadedJob.state_dict() -> dict[str, np.ndarray];  .load_state_dict(state);  .release()
    train(job, batches, *, start_step, total_steps, checkpoint_every, checkpoint_dir, stop_on_nan,
          on_step, should_stop) -> TrainOutcome(status, last_step, last_checkpoint_step, message)
    latest_checkpoint(checkpoint_dir) -> (step, npz path) | None;  list_checkpoints(dir), newest
    first;  load_checkpoint(path) -> state (checked against the hash saved with it)
    report(job, out_dir) -> dict

Every op of the step is computed by the kernel library (`wse_sim.runtime.kernels`) and its
cycles are charged to the region through wse_sim's block engine (`wse_sim.runtime.timing`).
Dropout uses a counter-based RNG of the runtime's own (`kernels.nn.counter_uniform`): it is
deterministic in (seed, node, step) but cannot reproduce torch's random stream.
"""

from __future__ import annotations

from wse_sim.runtime.checkpoint import (
    CheckpointError,
    checkpoint_sha256,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from wse_sim.runtime.job import ArtifactMismatchError, JobReleasedError, LoadedJob, StepResult, load
from wse_sim.runtime.kernels import KERNELS, UnsupportedKernelError
from wse_sim.runtime.report import report
from wse_sim.runtime.training import StepRecord, TrainOutcome, train

__all__ = [
    "KERNELS",
    "ArtifactMismatchError",
    "CheckpointError",
    "checkpoint_sha256",
    "JobReleasedError",
    "LoadedJob",
    "StepRecord",
    "StepResult",
    "TrainOutcome",
    "UnsupportedKernelError",
    "latest_checkpoint",
    "list_checkpoints",
    "load",
    "load_checkpoint",
    "prune_checkpoints",
    "report",
    "save_checkpoint",
    "train",
]
