"""A runner job's script (`entry.script`, docs/runner.md) run inside SAM's sandboxes.

The script is the user's own train.py: it builds its model, optimizer and criterion and calls
`sam.Runner(...).train(train_data_fn=..., num_epochs=..., train_step_fn=...)`. Here it runs as
`python train.py ARGS` would (as `__main__`, in /job/src, with the job's args), with a backend
installed in the `sam` package that takes over `Runner.train`:

- "capture" (the compile sandbox): one batch of `train_data_fn()` and the user's objects go to
  `compiler.step_capture.capture_train_step`, which traces the whole step (forward, any loss
  composition, backward, clipping, optimizer.step(), a scheduler) into one graph; the script
  stops there.
- "feed" (the data sandbox): `train_data_fn()` is iterated epoch after epoch (a fresh iterable
  each epoch, its first steps_per_epoch batches), and the batches of steps start_step, ... are
  written as frames for the wafer worker.

Both run tenant code: only ever inside a sandbox (or in-process by trusted callers: tests).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.data import normalize_batch
from compiler.errors import CompileError, InvalidSpec, ModelError
from compiler.user_code import user_code_error

if TYPE_CHECKING:
    from compiler.frontend import TracedStep


class _Done(BaseException):
    """Raised out of Runner.train to end the script once the backend has what it needs (a
    BaseException, so that the script's own `except Exception` does not swallow it)."""


class _Backend:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        data = spec["data"]
        self.batch_size = int(data["batch_size"])
        # the data sets bound at /datasets/NAME (sam.dataset_path); `dataset` first, as RunSpec
        named = ([data["dataset"]] if data.get("dataset") else []) + list(
            data.get("datasets") or []
        )
        self.datasets = tuple(dict.fromkeys(str(n) for n in named))
        run = spec.get("run_options") or {}
        self.num_epochs = int(run.get("num_epochs") or 1)
        self.steps_per_epoch = int(run.get("steps_per_epoch") or 1)

    def loader(self, train_data_fn: Callable[[], Any]) -> Any:
        """A fresh train_data_fn() iterable."""
        try:
            return train_data_fn()
        except Exception as exc:
            raise user_code_error("calling train_data_fn()", exc) from exc

    def batches(self, train_data_fn: Callable[[], Any], epoch: int, loader: Any = None) -> Any:
        """The first steps_per_epoch batches of a fresh train_data_fn() iterable (or of
        `loader`), as pairs."""
        try:
            iterable = iter(self.loader(train_data_fn) if loader is None else loader)
        except CompileError:
            raise
        except Exception as exc:
            raise user_code_error("iterating train_data_fn()", exc) from exc
        for index in range(self.steps_per_epoch):
            try:
                batch = next(iterable)
            except StopIteration:
                raise ModelError(
                    f"train_data_fn() gave {index} batches in epoch {epoch + 1}, but the job has "
                    f"{self.steps_per_epoch} steps per epoch (fixed at submit); give every epoch "
                    "the same batches"
                ) from None
            except Exception as exc:
                raise user_code_error(f"reading batch {index} of train_data_fn()", exc) from exc
            yield self.pair(batch, index)

    def pair(self, batch: Any, index: int) -> tuple[Any, Any]:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ModelError(
                f"train_data_fn()'s batch {index} is a {type(batch).__name__}; each batch must "
                "be a pair (inputs, labels)"
            )
        rows = len(batch[0]) if hasattr(batch[0], "__len__") else -1
        if rows != self.batch_size:
            raise ModelError(
                f"train_data_fn()'s batch {index} has {rows} rows, but the job is compiled for "
                f"batch_size {self.batch_size}; use DataLoader(..., batch_size=runner.batch_size, "
                "drop_last=True)"
            )
        return batch[0], batch[1]


class CaptureBackend(_Backend):
    """Runner.train in the compile sandbox: capture the step over the first batch."""

    traced: TracedStep | None = None

    def train(
        self,
        runner: Any,
        train_data_fn: Any,
        num_epochs: int,
        train_step_fn: Any,
        steps_per_epoch: int | None,
    ) -> Any:
        from compiler.step_capture import capture_train_step

        loader = self.loader(train_data_fn)
        # a short last batch is refused here, before any wafer time (the data sandbox would
        # meet it only at the end of the first epoch)
        short = importlib.import_module("sam.batches").short_batch_problem
        problem = short(loader, self.batch_size, self.steps_per_epoch)
        if problem:
            raise ModelError(problem)
        inputs, labels = next(iter(self.batches(train_data_fn, 0, loader)))
        self.traced = capture_train_step(
            runner.model,
            runner.optimizer,
            train_step_fn,
            runner.loss_fn,
            inputs,
            labels,
            scheduler=runner.scheduler,
            scheduler_per="epoch" if runner.scheduler is not None else None,
            steps_per_epoch=self.steps_per_epoch,
            total_steps=self.num_epochs * self.steps_per_epoch,
        )
        raise _Done


class FeedBackend(_Backend):
    """Runner.train in the data sandbox: every batch of steps start_step, ... to `write`."""

    def __init__(
        self,
        spec: dict[str, Any],
        start_step: int,
        write: Callable[[np.ndarray, np.ndarray], None],
    ) -> None:
        super().__init__(spec)
        self.start_step = start_step
        self.write = write

    def train(
        self,
        runner: Any,
        train_data_fn: Any,
        num_epochs: int,
        train_step_fn: Any,
        steps_per_epoch: int | None,
    ) -> Any:
        step = 0
        # Epochs before a resume point are iterated too: a shuffling sampler draws from the
        # global generator each epoch, so skipping one would change the next ones' order.
        for epoch in range(self.num_epochs):
            for inputs, labels in self.batches(train_data_fn, epoch):
                if step >= self.start_step:
                    try:
                        self.write(*normalize_batch((inputs, labels)))
                    except TypeError as exc:
                        raise ModelError(f"train_data_fn()'s batch {step}: {exc}") from None
                step += 1
        raise _Done


def run_script(spec: dict[str, Any], source_dir: Path, backend: Any) -> None:
    """Run the job's entry script as `python SCRIPT ARGS` in `source_dir`, with `backend`
    taking over Runner.train; returns once Runner.train has handed it what it needs."""
    import runpy

    entry = spec.get("entry") or {}
    script = source_dir / str(entry.get("script") or "")
    if not script.is_file():
        raise InvalidSpec(f"entry.script {entry.get('script')!r} is not a file of the project")
    try:
        runner_module = importlib.import_module("sam.runner")
    except ImportError as exc:
        raise InvalidSpec(f"the sam package (Runner) is not available here: {exc}") from None
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    sys.argv = [str(script), *[str(a) for a in entry.get("args") or []]]
    if str(script.parent) not in sys.path:
        sys.path.insert(0, str(script.parent))
    runner_module._install_backend(backend)
    try:
        os.chdir(source_dir)
        runpy.run_path(str(script), run_name="__main__")
    except _Done:
        return
    except CompileError:
        raise
    except SystemExit as exc:
        raise ModelError(
            f"{script.name} exited (status {exc.code}) before calling runner.train(...)"
        ) from None
    except Exception as exc:
        raise user_code_error(f"running {script.name}", exc) from exc
    finally:
        runner_module._install_backend(None)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    raise ModelError(
        f"{script.name} ended without calling runner.train(...): a runner job's script hands "
        "its train_step to sam.Runner"
    )


def capture_script(spec: dict[str, Any], source_dir: Path) -> TracedStep:
    """The TracedStep of the job's script's train_step (compile sandbox)."""
    backend = CaptureBackend(spec)
    run_script(spec, source_dir, backend)
    assert backend.traced is not None  # run_script returns only once it is captured
    return backend.traced


def feed_script(
    spec: dict[str, Any],
    source_dir: Path,
    start_step: int,
    write: Callable[[np.ndarray, np.ndarray], None],
) -> None:
    """Write the batches of steps start_step, ... of the job's script (data sandbox)."""
    run_script(spec, source_dir, FeedBackend(spec, start_step, write))
