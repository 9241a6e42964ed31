"""`Runner`: the seed's programming model (docs/runner.md).

A train.py builds its model, optimizer and criterion, writes its own
`train_step(model, inputs, labels, criterion, optimizer)` and hands them to a Runner:

    runner = Runner(model=model, loss_fn=criterion, optimizer=optimizer,
                    config_path="./configs/cerebras_config.yaml")
    result = runner.train(train_data_fn=lambda: DataLoader(dataset, batch_size=runner.batch_size),
                          num_epochs=3, train_step_fn=train_step)

Where `train()` runs depends on where the script runs:
- on a login node (the default), it submits the script's folder as a SAM job whose entry is the
  script (`client.sam.remote`), follows it, and returns its losses and trained weights;
- with `local=True` or SAM_RUNNER=local, it trains in eager PyTorch right here
  (`client.sam.local`): the reference the wafer's losses are compared with;
- inside SAM's sandboxes, the compile and data sandboxes install a backend (`_install_backend`)
  that captures the step or feeds the batches instead.

Importing this module imports neither torch nor the rest of the client: inside a sandbox only
this package is on the path, and on a login node the script itself imports torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from . import datasets as _datasets
from .result import RunnerError

MODES = ("local", "remote")
DEFAULT_BATCH_SIZE = 32
DATASETS_ROOT = "/datasets"  # where a job's data sets are bound in SAM's sandboxes
LOCAL_DATASETS_ENV = "SAM_DATASETS"  # the login node's folder of data sets, one folder each


class Backend(Protocol):
    """What a SAM sandbox installs to take over `Runner.train` (capture the step, feed batches)."""

    batch_size: int
    datasets: tuple[str, ...]  # the data sets the job names

    def train(
        self,
        runner: Runner,
        train_data_fn: Any,
        num_epochs: int,
        train_step_fn: Any,
        steps_per_epoch: int | None,
    ) -> Any: ...


_backend: Backend | None = None


def _install_backend(backend: Backend | None) -> None:
    """Used by SAM's sandboxes only: route every `Runner.train` in this process to `backend`."""
    global _backend
    _backend = backend


class Runner:
    """Compiles and runs a train_step on SAM's wafers, or in eager PyTorch with `local=True`."""

    def __init__(
        self,
        model: Any,
        loss_fn: Any,
        optimizer: Any,
        config_path: str | os.PathLike[str] | None = None,
        *,
        scheduler: Any = None,
        local: bool = False,
        wait: bool | None = None,
        datasets: list[str] | dict[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        if model is None or not callable(model) or not hasattr(model, "state_dict"):
            raise RunnerError("Runner(model=...) takes the torch.nn.Module to train")
        if optimizer is None or not hasattr(optimizer, "step"):
            raise RunnerError("Runner(optimizer=...) takes a torch.optim optimizer of the model")
        if loss_fn is None or not callable(loss_fn):
            raise RunnerError("Runner(loss_fn=...) takes the criterion the train_step uses")
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config_path = Path(config_path) if config_path is not None else None
        self.raw_config, self.config = read_runner_config(self.config_path)
        self.local = local
        self.wait = wait
        self.datasets = _datasets.names_of(datasets)
        if isinstance(datasets, dict):
            _datasets.local_copies.update(
                {n: Path(p).expanduser() for n, p in datasets.items() if p}
            )

    @property
    def mode(self) -> str:
        """'sandbox' inside SAM, else 'local' or 'remote' (`local=True` or SAM_RUNNER=local)."""
        if _backend is not None:
            return "sandbox"
        wanted = os.environ.get("SAM_RUNNER", "").strip().lower()
        if wanted and wanted not in MODES:
            raise RunnerError(f"SAM_RUNNER={wanted!r}: use 'local' (eager here) or 'remote'")
        return "local" if self.local or wanted == "local" else "remote"

    @property
    def batch_size(self) -> int:
        """The batch size the job is compiled for: `batch_size` in the config file, else 32."""
        if _backend is not None:
            return int(_backend.batch_size)
        return int(self.config.get("batch_size") or DEFAULT_BATCH_SIZE)

    def train(
        self,
        train_data_fn: Any,
        num_epochs: int | None = None,
        train_step_fn: Any = None,
        steps_per_epoch: int | None = None,
    ) -> Any:
        """Run `train_step_fn(model, inputs, labels, loss_fn, optimizer)` over every batch of
        `train_data_fn()` (a fresh iterable each epoch; its first `steps_per_epoch` batches when
        given) for `num_epochs` epochs; returns a RunResult. num_epochs and steps_per_epoch
        not given here come from the config file (num_epochs: else 1)."""
        if not callable(train_data_fn):
            raise RunnerError(
                "train(train_data_fn=...) takes a function returning the batches, e.g. "
                "lambda: DataLoader(dataset, batch_size=runner.batch_size)"
            )
        if not callable(train_step_fn):
            raise RunnerError(
                "train(train_step_fn=...) takes your step: "
                "train_step(model, inputs, labels, criterion, optimizer) -> loss"
            )
        num_epochs = self._setting("num_epochs", num_epochs) or 1
        steps_per_epoch = self._setting("steps_per_epoch", steps_per_epoch)
        mode = self.mode
        if mode == "sandbox":
            assert _backend is not None
            return _backend.train(self, train_data_fn, num_epochs, train_step_fn, steps_per_epoch)
        if mode == "local":
            from .local import train_locally

            return train_locally(self, train_data_fn, num_epochs, train_step_fn, steps_per_epoch)
        from .remote import train_remotely

        return train_remotely(self, train_data_fn, num_epochs, train_step_fn, steps_per_epoch)

    def _setting(self, key: str, given: int | None) -> int | None:
        """train()'s value of num_epochs / steps_per_epoch, else the config's; both must agree."""
        for value in (given, self.config.get(key)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise RunnerError(f"{key} must be a positive integer, not {value!r}")
        configured = self.config.get(key)
        if given is not None and configured is not None and given != configured:
            raise RunnerError(
                f"{key} is {given} in runner.train() but {configured} in {self.config_path}; "
                "keep one"
            )
        return given if given is not None else configured


def dataset_path(name: str) -> Path:
    """The folder of data set `name` wherever the script runs (docs/runner.md, "Data sets"):
    /datasets/NAME in SAM's sandboxes (the job names it: Runner(datasets=[NAME])); on this
    machine (local=True, or before a submit) its copy here: Runner(datasets={NAME: folder}),
    else $SAM_DATASETS/NAME."""
    if _backend is not None:
        named = tuple(getattr(_backend, "datasets", ()) or ())
        if name not in named:
            raise RunnerError(
                f"data set {name!r} is not one the job names ({', '.join(named) or 'none'}); "
                f"pass Runner(..., datasets=[{name!r}])"
            )
        return Path(DATASETS_ROOT) / name
    _datasets.asked.add(name)
    if name in _datasets.local_copies:
        return _datasets.local_copies[name]
    root = os.environ.get(LOCAL_DATASETS_ENV, "").strip()
    if root:
        return Path(root).expanduser() / name
    raise RunnerError(
        f"data set {name!r} has no copy on this machine: set {LOCAL_DATASETS_ENV} to a folder "
        f"holding a folder {name}/ (as `sam data put {name}` took it), or pass "
        f"Runner(datasets={{{name!r}: 'path/to/{name}'}}); on SAM it is {DATASETS_ROOT}/{name}"
    )


def read_runner_config(path: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config file as read, and its keys flat (the seed's cerebras_config.yaml: batch_size,
    num_epochs, target_device, ...), checked as `sam submit --config` checks them."""
    if path is None or _backend is not None:
        return {}, {}  # inside SAM the job's spec already holds the config
    from client.cerebras_config import config_sections
    from client.errors import JobSpecError
    from client.jobspec import read_yaml_file

    try:
        config = read_yaml_file(path, "config file")
        config_sections(config, str(path))  # unknown keys and clashes are errors
    except JobSpecError as exc:
        raise RunnerError(str(exc)) from None
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(value)
        else:
            flat[key] = value
    size = flat.get("batch_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise RunnerError(f"{path}: batch_size must be a positive integer, not {size!r}")
    return config, flat
