"""What a wafer job writes for its user besides steps: log verbosity, per-epoch summaries, the
final weights, and the checkpoint a job starts from (`run_options.init_from`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sam_domain.run import RunSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_server.services.lifecycle import Claim
    from wse_sim.runtime.job import LoadedJob

LEVELS = {"DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40}


def shown(level: str, job_level: str) -> bool:
    """Whether a line of `level` goes to a log whose `run_options.log_level` is `job_level`."""
    return LEVELS.get(level.upper(), 20) >= LEVELS.get(job_level.upper(), 20)


class EpochTracker:
    """Collects each step's loss and accuracy; a summary line when a step ends an epoch."""

    def __init__(self, steps_per_epoch: int, num_epochs: int) -> None:
        self.steps_per_epoch = max(1, int(steps_per_epoch))
        self.num_epochs = max(1, int(num_epochs))
        self.losses: list[float] = []
        self.accuracies: list[float] = []
        self.first_step: int | None = None

    def add(self, step: int, loss: float, accuracy: float | None) -> str | None:
        """Record step `step`; return the epoch's summary if it was the epoch's last step."""
        if self.first_step is None:
            self.first_step = step
        self.losses.append(loss)
        if accuracy is not None:
            self.accuracies.append(accuracy)
        if (step + 1) % self.steps_per_epoch:
            return None
        epoch = (step + 1) // self.steps_per_epoch
        first = self.first_step
        line = f"epoch {epoch}/{self.num_epochs}: mean loss {float(np.mean(self.losses)):.6g}"
        if self.accuracies:
            line += f", accuracy {100 * float(np.mean(self.accuracies)):.2f}%"
        line += f" over steps {first}-{step}"
        if first != step + 1 - self.steps_per_epoch:
            line += " (this attempt's part of the epoch)"
        self.losses, self.accuracies, self.first_step = [], [], None
        return line


def model_weights(job: LoadedJob) -> dict[str, np.ndarray]:
    """The model's parameters and buffers (e.g. BatchNorm running statistics) under the model's
    own names ("fc1.weight"), from a loaded job's state; optimizer state is left out."""
    out = {}
    for inp in job.graph["inputs"]:
        if inp["role"] in ("param", "buffer") and inp["name"] in job.state:
            out[inp.get("source_name") or inp["name"]] = np.array(job.state[inp["name"]])
    return out


def save_weights(weights: dict[str, np.ndarray], path: Path) -> Path:
    """Write `weights` as a torch state_dict (tensors only, so `torch.load(weights_only=True)`
    reads it), atomically."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}, tmp)
    os.replace(tmp, path)
    return path


class InitFromError(ValueError):
    """The checkpoint named by run_options.init_from does not exist; name one that does."""


def resolve_init_from(url: str, data_dir: Path, claim: Claim) -> Path | None:
    """The .npz a job starts from (run_options.init_from), or None when it names none.

    Only a job of the same tenant counts (another tenant's id reads as unknown).
    """
    wanted = RunSpec.of(claim.spec).run.init_from
    if wanted is None:
        return None
    from sam_server.db.models import Job
    from sam_server.db.session import session_scope
    from sam_server.services import results

    with session_scope(url) as session:
        source = session.get(Job, wanted.job)
        if source is None or source.tenant_id != claim.tenant_id:
            raise InitFromError(f"run_options.init_from: no job {wanted.job!r} in your tenant")
        directory = results.checkpoint_dir(
            data_dir, job_id=source.id, tenant=source.tenant.name, spec=source.spec
        )
    steps = [c["step"] for c in results.list_checkpoints(directory)]
    step = wanted.step or (steps[-1] if steps else None)
    found = results.checkpoint_file(directory, step) if step else None
    if found is None:
        raise InitFromError(
            f"run_options.init_from: job {wanted.job} has no checkpoint of step {step}; "
            f"it has {steps or 'none'}"
        )
    return found
