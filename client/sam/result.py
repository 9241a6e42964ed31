"""What a Runner gives back and the error it raises: apart from runner.py so that its local and
remote halves import them without importing the Runner (which imports those halves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class RunnerError(Exception):
    """A Runner was used wrongly (the message says how to fix it)."""


@dataclass
class RunResult:
    """What `Runner.train` returns: each step's loss, each epoch's mean loss and accuracy, and the
    trained weights (a state_dict of CPU tensors, loadable with `model.load_state_dict`)."""

    losses: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    epoch_accuracies: list[float | None] = field(default_factory=list)
    weights: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    state: str = "succeeded"

    @property
    def final_loss(self) -> float | None:
        return self.losses[-1] if self.losses else None
