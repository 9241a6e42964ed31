"""`Runner(local=True)` (or SAM_RUNNER=local): the script's training in eager PyTorch, right here.

The reference a wafer run is compared with: the same train_step over the same batches, with the
console the wafer job's log shows (one line per epoch: mean loss and accuracy). Torch is never
imported here: every tensor comes from the script, which imports torch itself.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .result import RunnerError, RunResult

if TYPE_CHECKING:
    from .runner import Runner


def batch_pair(batch: Any, where: str) -> tuple[Any, Any]:
    """(inputs, labels) of one batch of train_data_fn(); anything else is refused by name."""
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    raise RunnerError(
        f"{where} gave a {type(batch).__name__}; each batch must be a pair (inputs, labels), "
        "as a DataLoader over a Dataset whose __getitem__ returns (x, y) gives"
    )


def loss_value(returned: Any) -> float:
    """The float of what train_step returned: a loss tensor (or the first of a tuple)."""
    if isinstance(returned, (tuple, list)) and returned:
        returned = returned[0]
    if hasattr(returned, "detach"):
        returned = returned.detach()
        if returned.numel() != 1:
            raise RunnerError(
                f"train_step returned a tensor of shape {tuple(returned.shape)}; return the "
                "scalar loss (e.g. loss, not the per-example losses)"
            )
        return float(returned.reshape(()).item())
    if isinstance(returned, (int, float)) and not isinstance(returned, bool):
        return float(returned)
    raise RunnerError(
        f"train_step returned {type(returned).__name__}; return the loss tensor it minimized"
    )


class _OutputWatch:
    """The model's last forward output (a forward hook), for the step's accuracy."""

    def __init__(self, model: Any) -> None:
        self.output: Any = None
        self._handle = model.register_forward_hook(self._seen)

    def _seen(self, _module: Any, _inputs: Any, output: Any) -> None:
        if isinstance(output, (tuple, list)) and output:
            output = output[0]
        self.output = output

    def accuracy(self, labels: Any) -> float | None:
        """Share of rows whose argmax is the label, when the output is class scores."""
        out, self.output = self.output, None
        if out is None or not hasattr(out, "argmax") or not hasattr(labels, "dtype"):
            return None
        if not out.is_floating_point() or labels.is_floating_point() or out.dim() < 2:
            return None
        if tuple(out.shape[:-1]) != tuple(labels.shape):
            return None
        return float((out.detach().argmax(-1) == labels).float().mean().item())

    def close(self) -> None:
        self._handle.remove()


def epoch_line(epoch: int, num_epochs: int, losses: list[float], accs: list[float]) -> str:
    """The console line of an epoch, worded as a wafer job's log says it."""
    line = f"epoch {epoch}/{num_epochs}: mean loss {sum(losses) / len(losses):.6g}"
    if accs and len(accs) == len(losses):
        line += f", accuracy {100 * sum(accs) / len(accs):.2f}%"
    return line


def train_locally(
    runner: Runner,
    train_data_fn: Any,
    num_epochs: int,
    train_step_fn: Any,
    steps_per_epoch: int | None,
) -> RunResult:
    """Train in eager PyTorch; prints one line per epoch and returns the RunResult."""
    model = runner.model
    model.train()
    result = RunResult()
    watch = _OutputWatch(model)
    batch_size = runner.batch_size
    try:
        for epoch in range(1, num_epochs + 1):
            losses: list[float] = []
            accs: list[float] = []
            for index, batch in enumerate(train_data_fn()):
                if steps_per_epoch is not None and index >= steps_per_epoch:
                    break
                inputs, labels = batch_pair(batch, f"train_data_fn()'s batch {index}")
                rows = len(inputs) if hasattr(inputs, "__len__") else batch_size
                if rows != batch_size:
                    print(
                        f"warning: batch {index} of epoch {epoch} has {rows} rows, not "
                        f"batch_size {batch_size}; a wafer job refuses it (use drop_last=True)",
                        file=sys.stderr,
                    )
                loss = loss_value(
                    train_step_fn(model, inputs, labels, runner.loss_fn, runner.optimizer)
                )
                losses.append(loss)
                accuracy = watch.accuracy(labels)
                if accuracy is not None:
                    accs.append(accuracy)
            if not losses:
                raise RunnerError(f"train_data_fn() gave no batch in epoch {epoch}")
            if runner.scheduler is not None:
                runner.scheduler.step()
            print(epoch_line(epoch, num_epochs, losses, accs), flush=True)
            result.losses.extend(losses)
            result.epoch_losses.append(sum(losses) / len(losses))
            result.epoch_accuracies.append(
                sum(accs) / len(accs) if accs and len(accs) == len(losses) else None
            )
    finally:
        watch.close()
    result.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return result
