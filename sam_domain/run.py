"""What a wafer worker reads of a job's spec, typed and frozen (`RunSpec.of(stored_spec)`),
instead of `.get(...)` chains over the stored JSON. The defaults are the job spec's own
(sam_server.schemas.job_spec; tests/seams/test_run_spec.py checks they agree), so a stored spec
written before a field existed reads as the schema would fill it in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InitFrom:
    """Start from an earlier job's checkpoint: its id, and the step (None: the newest)."""

    job: str
    step: int | None = None


@dataclass(frozen=True)
class RunOptions:
    """The spec's `run_options`."""

    num_epochs: int = 1
    steps_per_epoch: int = 100
    checkpoint_enabled: bool = True
    checkpoint_every: int = 50
    checkpoint_dir: str | None = None
    log_level: str = "INFO"
    stop_on_nan: bool = True
    init_from: InitFrom | None = None

    @property
    def checkpoint_interval(self) -> int | None:
        """Steps between checkpoints, or None when the job has them off."""
        return self.checkpoint_every if self.checkpoint_enabled else None


@dataclass(frozen=True)
class DataLoading:
    """The spec's `data_loading`: how far the worker's loader reads ahead, and in a thread."""

    prefetch_depth: int = 2
    use_parallel_loader: bool = True


@dataclass(frozen=True)
class RunSpec:
    """The parts of a stored job spec the workers act on."""

    mode: str = "train"
    project: str | None = None
    target_device: str = "WSE-2"
    data_source: str = "synthetic"
    datasets: tuple[str, ...] = ()  # the data sets the job names (`dataset`, then `datasets`)
    run: RunOptions = RunOptions()
    loading: DataLoading = DataLoading()

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> RunSpec:
        """The typed view of a stored spec (the API's validated dump, as JSON)."""
        data = spec.get("data") or {}
        named = ([data["dataset"]] if data.get("dataset") else []) + list(
            data.get("datasets") or []
        )
        run = dict(spec.get("run_options") or {})
        init = run.pop("init_from", None)
        known = RunOptions.__dataclass_fields__
        options = RunOptions(
            **{k: v for k, v in run.items() if k in known and v is not None},
            init_from=InitFrom(str(init["job"]), init.get("step")) if init else None,
        )
        loading = spec.get("data_loading") or {}
        return cls(
            mode=str(spec.get("mode") or "train"),
            project=spec.get("project"),
            target_device=str((spec.get("compile_options") or {}).get("target_device") or "WSE-2"),
            data_source=str(data.get("source") or "synthetic"),
            datasets=tuple(dict.fromkeys(str(name) for name in named)),
            run=options,
            loading=DataLoading(
                prefetch_depth=int(loading.get("prefetch_depth", 2)),
                use_parallel_loader=bool(loading.get("use_parallel_loader", True)),
            ),
        )
