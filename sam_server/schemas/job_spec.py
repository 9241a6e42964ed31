"""The job spec (`job.yaml`), docs/contract.md section 1.

Every model forbids unknown keys so that a typo fails at submit instead of being ignored.
Workers receive `JobSpec.model_dump(mode="json")`: a plain dict with every default filled in.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sam_domain.jobs import PriorityClass
from sam_server.schemas.numbers import (
    INT32_MAX,
    INT64_MAX,
    MAX_TIME_LIMIT_S,
    MAX_TOTAL_STEPS,
    PositiveInt32,
)

DATASET_NAME = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | int | float) -> int:
    """Seconds in a duration such as ``90``, ``"30m"``, ``"2h"`` or ``"1.5h"``: positive and at
    most `MAX_TIME_LIMIT_S` (a year), else ValueError (never OverflowError: 1e30 is refused)."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string such as '30m'")
    if isinstance(value, int | float):
        seconds = float(value) if abs(value) <= MAX_TIME_LIMIT_S else math.copysign(math.inf, value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            shown = str(value)[:64]
            raise ValueError(f"{shown!r} is not a duration; write e.g. '90s', '30m' or '2h'")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError("a duration must be positive")
    if seconds > MAX_TIME_LIMIT_S:
        raise ValueError(f"a duration is at most {MAX_TIME_LIMIT_S // 86400} days ('366d')")
    return max(1, int(round(seconds)))


class _Strict(BaseModel):
    # Floats are real numbers (Infinity/NaN refused), integers fit the int4/int8 they become.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


FACTORY_PATH = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class ModelSpec(_Strict):
    """The model: a user file and class, a built-in family, or a library's factory."""

    file: str | None = None
    class_: str | None = Field(default=None, alias="class")
    builtin: Literal["mlp", "cnn", "gpt"] | None = None
    # A callable in an allowed package (Settings.model_factory_packages) or the job's own
    # project, e.g. torchvision.models.googlenet: factory(**kwargs) returns the nn.Module.
    factory: str | None = Field(default=None, max_length=200, pattern=FACTORY_PATH)
    # A transformers model class's config: factory(factory.config_class(**config), **kwargs).
    config: dict[str, Any] | None = None
    # The keyword the batch's inputs (and, with train.loss: model, its targets) are passed as;
    # unset: a transformers model's main_input_name and `labels`, else positionally.
    inputs: str | None = Field(default=None, pattern=IDENTIFIER)
    targets: str | None = Field(default=None, pattern=IDENTIFIER)
    kwargs: dict[str, object] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        sources = [
            name
            for name, given in (
                ("builtin", self.builtin is not None),
                ("file + class", bool(self.file or self.class_)),
                ("factory", self.factory is not None),
            )
            if given
        ]
        if len(sources) > 1:
            raise ValueError(
                f"give one of model.builtin, model.file + model.class or model.factory, "
                f"not {' and '.join(sources)}"
            )
        if not sources or (sources == ["file + class"] and not (self.file and self.class_)):
            raise ValueError(
                "model needs 'file' and 'class', 'builtin: mlp|cnn|gpt', or 'factory' "
                "(e.g. torchvision.models.resnet18)"
            )
        if self.config is not None and self.factory is None:
            raise ValueError("model.config is for model.factory (a transformers model class)")
        if self.builtin is not None and (self.inputs or self.targets):
            raise ValueError("model.inputs / model.targets name a file's or factory's arguments")
        return self


class EntrySpec(_Strict):
    """A runner job (docs/runner.md): a script of the job's project that builds its model and
    calls `sam.Runner.train`; the compile sandbox captures its train_step, the data sandbox
    iterates its train_data_fn()."""

    script: str = Field(min_length=4, max_length=255, pattern=r"^[^\\\x00]+\.py$")
    args: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=64)

    @field_validator("script")
    @classmethod
    def _inside_the_project(cls, v: str) -> str:
        parts = v.split("/")
        if v.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(
                f"entry.script {v!r} must be a path inside the project, e.g. train.py or "
                "src/train.py (no leading '/', no '..')"
            )
        return v


class DataSpec(_Strict):
    """Where batches come from."""

    # script: a runner job's own train_data_fn() (set with `entry`, never alone)
    source: Literal["synthetic", "file", "script"] = "synthetic"
    task: Literal["classification", "regression", "language_model"] | None = None
    input_shape: list[PositiveInt32] | None = Field(default=None, max_length=8)
    num_classes: int | None = Field(default=None, ge=1, le=INT32_MAX)
    file: str | None = None
    function: str | None = None
    batch_size: int = Field(default=64, ge=1, le=65536)
    # Data sets mounted read-only at /datasets/NAME in the data sandbox (docs/data.md), read by
    # a make_batch (source 'file') or a runner job's script (also at its compile, runner.md).
    dataset: str | None = Field(default=None, pattern=DATASET_NAME)
    datasets: list[str] = Field(default_factory=list, max_length=16)

    @field_validator("datasets")
    @classmethod
    def _dataset_names(cls, v: list[str]) -> list[str]:
        bad = [n for n in v if not re.match(DATASET_NAME, n)]
        if bad:
            raise ValueError(
                f"data set names {bad} are not valid: letters, digits, '_', '-', '.' "
                "(at most 64, not starting with '.')"
            )
        return v

    def dataset_names(self) -> list[str]:
        """Every data set the job names (data.dataset first), once each."""
        names = ([self.dataset] if self.dataset else []) + self.datasets
        return list(dict.fromkeys(names))

    @field_validator("input_shape")
    @classmethod
    def _positive_dims(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or any(d <= 0 for d in v)):
            raise ValueError("input_shape must be a non-empty list of positive sizes")
        return v

    @model_validator(mode="after")
    def _source_fields(self) -> DataSpec:
        if self.source == "file" and not self.function:
            raise ValueError(
                "data.source 'file' needs data.function (make_batch(step, batch_size))"
            )
        if self.source in ("synthetic", "script") and (self.function or self.file):
            raise ValueError("data.file and data.function are only for data.source 'file'")
        if self.dataset_names() and self.source == "file":
            if self.task is None or self.input_shape is None:
                raise ValueError(
                    "a job naming a data set declares data.task and data.input_shape "
                    "(the compile never reads the data set)"
                )
        return self


class OptimizerSpec(_Strict):
    """torch.optim's meaning of every field."""

    model_config = ConfigDict(extra="allow")
    name: Literal["sgd", "adam", "adamw"] = "sgd"
    lr: float = Field(default=0.01, gt=0)

    @model_validator(mode="after")
    def _known_fields(self) -> OptimizerSpec:
        allowed = {
            "sgd": {"momentum", "dampening", "weight_decay", "nesterov"},
            "adam": {"betas", "eps", "weight_decay", "amsgrad"},
            "adamw": {"betas", "eps", "weight_decay", "amsgrad"},
        }[self.name]
        extra = set(self.model_extra or {}) - allowed
        if extra:
            raise ValueError(
                f"optimizer {self.name!r} has no field(s) {sorted(extra)}; allowed: {sorted(allowed)}"
            )
        return self


class GradClipSpec(_Strict):
    """torch.nn.utils.clip_grad_norm_(max_norm, norm_type) or clip_grad_value_(clip_value)."""

    max_norm: float | None = Field(default=None, gt=0)
    norm_type: float | str = 2.0  # a p-norm (p > 0), or "inf"
    clip_value: float | None = Field(default=None, gt=0)

    @field_validator("norm_type", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> float | str:
        if str(v).lower() in ("inf", "infinity"):
            return "inf"
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
            raise ValueError('norm_type is a positive number (a p-norm) or "inf"')
        return float(v)

    @model_validator(mode="after")
    def _one_kind(self) -> GradClipSpec:
        if (self.max_norm is None) == (self.clip_value is None):
            raise ValueError(
                "train.grad_clip needs max_norm (clip by norm) or clip_value, not both"
            )
        return self


class LRSchedulerSpec(_Strict):
    """A torch.optim.lr_scheduler, stepped once after every training step's update."""

    name: Literal["step", "cosine", "linear", "warmup_cosine"]
    step_size: int | None = Field(default=None, ge=1, le=INT32_MAX)  # step (StepLR)
    gamma: float = Field(default=0.1, gt=0)  # step
    T_max: int | None = Field(
        default=None, ge=1, le=INT32_MAX
    )  # cosine, warmup_cosine (CosineAnnealingLR)
    eta_min: float = Field(default=0.0, ge=0)  # cosine, warmup_cosine
    start_factor: float = Field(default=1.0 / 3, gt=0, le=1)  # linear, warmup_cosine (LinearLR)
    end_factor: float = Field(default=1.0, ge=0, le=1)  # linear
    total_iters: int = Field(default=5, ge=1, le=INT32_MAX)  # linear
    warmup_iters: int | None = Field(default=None, ge=1, le=INT32_MAX)  # warmup_cosine

    @model_validator(mode="after")
    def _needed_fields(self) -> LRSchedulerSpec:
        need = {
            "step": ["step_size"],
            "cosine": ["T_max"],
            "warmup_cosine": ["warmup_iters", "T_max"],
        }
        missing = [k for k in need.get(self.name, []) if getattr(self, k) is None]
        if missing:
            raise ValueError(f"lr_scheduler {self.name!r} needs {missing}")
        return self


class LossScalingSpec(_Strict):
    """Dynamic loss scaling with torch.amp.GradScaler's fields and defaults."""

    enabled: bool | None = None  # None: on exactly when compile_options.fp16_enabled
    init_scale: float = Field(default=65536.0, gt=0)
    growth_factor: float = Field(default=2.0, gt=1)
    backoff_factor: float = Field(default=0.5, gt=0, lt=1)
    growth_interval: int = Field(default=2000, ge=1, le=INT32_MAX)


class TrainSpec(_Strict):
    loss: Literal["cross_entropy", "mse", "model"] = "cross_entropy"
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    seed: int = Field(default=0, ge=0, le=INT64_MAX)  # torch.manual_seed's and numpy's range
    grad_clip: GradClipSpec | None = None
    lr_scheduler: LRSchedulerSpec | None = None
    loss_scaling: LossScalingSpec = Field(default_factory=LossScalingSpec)


class CompileOptions(_Strict):
    target_device: Literal["WSE-2", "WSE-3"] = "WSE-2"
    fp16_enabled: bool = False
    optimizer_state_offload: bool = False
    # A number is the seed's per-job budget in GB; "2KiB/PE" the older per-PE cap (docs/training.md).
    max_activation_memory: float | str | None = None
    execution_mode: Literal["pipelined", "weight_streaming"] = "pipelined"
    # Gradient checkpointing: the backward recomputes the activations kept only for it.
    activation_recomputation: bool = False

    @field_validator("max_activation_memory", mode="before")
    @classmethod
    def _budget(cls, v: Any) -> object:
        from compiler.activation_budget import parse_activation_budget

        parse_activation_budget(v)  # raises ValueError with the accepted forms
        return v


class InitFrom(_Strict):
    """Start from an earlier job's checkpoint (same tenant): its weights, optimizer state and
    step count, so the losses continue as that job resumed would."""

    # a job id, or an array task's id (jabc_7)
    job: str = Field(min_length=2, max_length=32, pattern=r"^[a-z0-9]+(_[0-9]+)?$")
    step: int | None = Field(default=None, ge=1, le=MAX_TOTAL_STEPS)  # None: the newest checkpoint


class RunOptions(_Strict):
    num_epochs: int = Field(default=1, ge=1, le=MAX_TOTAL_STEPS)
    steps_per_epoch: int = Field(default=100, ge=1, le=MAX_TOTAL_STEPS)
    checkpoint_enabled: bool = True
    checkpoint_every: int = Field(default=50, ge=1, le=MAX_TOTAL_STEPS)
    # A folder inside the tenant's space of the artifact store ("runs/mnist"), never a host path.
    checkpoint_dir: str | None = Field(default=None, max_length=200)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    stop_on_nan: bool = True
    init_from: InitFrom | None = None

    @field_validator("checkpoint_dir")
    @classmethod
    def _tenant_relative(cls, v: str | None) -> str | None:
        return None if v is None else tenant_relative_dir(v)

    @model_validator(mode="after")
    def _total_steps_fit(self) -> RunOptions:
        if self.total_steps > MAX_TOTAL_STEPS:
            raise ValueError(
                f"num_epochs x steps_per_epoch is {self.total_steps:,} steps; a job runs at most "
                f"{MAX_TOTAL_STEPS:,} (split it into jobs that continue with init_from)"
            )
        return self

    @property
    def total_steps(self) -> int:
        return self.num_epochs * self.steps_per_epoch


class DataLoading(_Strict):
    prefetch_depth: int = Field(default=2, ge=0, le=64)
    use_parallel_loader: bool = True


class RegionRequest(_Strict):
    rows: int = Field(ge=1, le=INT32_MAX)
    cols: int = Field(ge=1, le=INT32_MAX)
    flexible: bool = False
    """The job also accepts other rectangles of about rows x cols PEs (the scheduler picks)."""
    max_aspect: float = Field(default=4.0, ge=1.0, le=1e6)
    """A flexible job's bound on long side / short side of the shapes it accepts."""


class Resources(_Strict):
    region: RegionRequest | None = None
    pes: int | None = Field(default=None, ge=1, le=INT32_MAX)
    time_limit: int = 1800  # seconds, at most MAX_TIME_LIMIT_S (parse_duration)

    @field_validator("time_limit", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> int:
        return parse_duration(v)

    @model_validator(mode="after")
    def _one_size(self) -> Resources:
        if self.region is not None and self.pes is not None:
            raise ValueError("give resources.region or resources.pes, not both")
        if self.region is None and self.pes is None:
            self.region = RegionRequest(rows=8, cols=8)
        return self

    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the requested rectangle; a PE count becomes the squarest shape."""
        if self.region is not None:
            return self.region.rows, self.region.cols
        return squarest_shape(self.pes or 1)


_DIR_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


def tenant_relative_dir(value: str) -> str:
    """`value` as a clean folder path inside the tenant's space ("./ckpt/" -> "ckpt"), or
    ValueError for an absolute path, `..`, or odd characters."""
    text = value.strip()
    if text.startswith(("/", "~")) or "\\" in text or ":" in text:
        raise ValueError(
            f"checkpoint_dir {value!r} is a host path; it names a folder inside your tenant's "
            "space in SAM's artifact store, e.g. 'checkpoints' or 'runs/mnist'"
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." or not _DIR_PART.match(p) for p in parts):
        raise ValueError(
            f"checkpoint_dir {value!r} must be a relative folder of letters, digits, '_', '-' "
            "and '.', without '..' (e.g. 'runs/mnist')"
        )
    return "/".join(parts)


def squarest_shape(pes: int) -> tuple[int, int]:
    """The (rows, cols) with rows*cols >= pes closest to a square, rows <= cols."""
    rows = max(1, int(pes**0.5))
    while rows > 1 and pes % rows:
        rows -= 1
    cols = pes // rows
    if rows * 4 < cols:  # a prime-ish count: accept a little waste for a usable shape
        rows = max(1, int(round(pes**0.5)))
        cols = -(-pes // rows)
    return rows, cols


class JobSpec(_Strict):
    """A whole job.yaml."""

    name: str = Field(min_length=1, max_length=128)
    priority: PriorityClass = "normal"
    mode: Literal["train", "compile_only", "validate_only"] = "train"
    # A job trains `model` with the `train` menu, or runs a runner script (`entry`): one of them.
    model: ModelSpec | None = None
    entry: EntrySpec | None = None
    data: DataSpec = Field(default_factory=DataSpec)
    train: TrainSpec = Field(default_factory=TrainSpec)
    compile_options: CompileOptions = Field(default_factory=CompileOptions)
    run_options: RunOptions = Field(default_factory=RunOptions)
    data_loading: DataLoading = Field(default_factory=DataLoading)
    resources: Resources = Field(default_factory=Resources)
    # The uploaded project the job runs in, read-only at /job/src (`sam submit` sets it).
    project: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_program(self) -> JobSpec:
        if (self.model is None) == (self.entry is None):
            raise ValueError(
                "give model (file + class, or builtin) or entry (a runner script: "
                "entry: {script: train.py}), not both"
                if self.model
                else "a job needs model (file + class, or builtin) or entry: {script: train.py}"
            )
        if self.entry is None:
            if self.data.source == "script":
                raise ValueError("data.source 'script' is a runner job's (give entry.script)")
            if self.data.dataset_names() and self.data.source != "file":
                raise ValueError(
                    "data.dataset is read by a make_batch (set data.source 'file') or by a "
                    "runner job's script (entry)"
                )
            return self
        if "train" in self.model_fields_set:
            raise ValueError(
                "a runner job's training is its script's train_step: remove the train section"
            )
        if "source" in self.data.model_fields_set and self.data.source != "script":
            raise ValueError("a runner job's batches come from its script: data.source 'script'")
        self.data.source = "script"
        return self

    @model_validator(mode="after")
    def _synthetic_defaults(self) -> JobSpec:
        d = self.data
        if d.source == "synthetic" and self.model is not None:
            if d.task is None:
                d.task = "language_model" if self.model.builtin == "gpt" else "classification"
            if d.input_shape is None:
                d.input_shape = {
                    "cnn": [1, 28, 28],
                    "gpt": [32],
                }.get(self.model.builtin or "", [784])
            if d.num_classes is None and d.task in ("classification", "language_model"):
                d.num_classes = 10 if d.task == "classification" else 64
        return self

    def referenced_files(self) -> list[str]:
        """Every file the spec names; each must be uploaded with the job."""
        names = [self.model.file if self.model else None, self.data.file]
        names.append(self.entry.script if self.entry else None)
        return [n for n in names if n]
