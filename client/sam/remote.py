"""Running the script's training as a SAM job (the next step lands it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .result import RunnerError

if TYPE_CHECKING:
    from .runner import Runner


def train_remotely(
    runner: Runner,
    train_data_fn: Any,
    num_epochs: int,
    train_step_fn: Any,
    steps_per_epoch: int | None,
) -> Any:
    raise RunnerError(
        "submitting a Runner script to SAM is not available yet; run it with "
        "Runner(..., local=True) or SAM_RUNNER=local"
    )
