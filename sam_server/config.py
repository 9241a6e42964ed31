"""SAM's settings tree (environment variables with the ``SAM_`` prefix, an optional settings
file) and the cluster file.

docs/contract.md section 4. This is the one module that reads SAM's environment: every other
module gets its settings passed in (tests/seams/test_no_environ.py checks it).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sam_domain.sandbox import SandboxOptions
from sam_server.errors import ConfigError

if TYPE_CHECKING:
    from sam_server.scheduling.framework.profile import Profile


from sam_server.cluster_file import (  # the cluster file, re-exported here
    DEFAULT_CLUSTER as DEFAULT_CLUSTER,
)
from sam_server.cluster_file import (
    ClusterConfig as ClusterConfig,
)
from sam_server.cluster_file import (
    SharedDataset as SharedDataset,
)
from sam_server.cluster_file import (
    WaferConfig as WaferConfig,
)
from sam_server.cluster_file import (
    arch_grid as arch_grid,
)
from sam_server.cluster_file import cluster_yaml


class Section(BaseModel):
    """One subsystem's settings. Each field is set by the environment variable `env_prefix` +
    its name in capitals (SAM_LEASE_S sets worker.lease_s), or by the settings file."""

    model_config = ConfigDict(extra="forbid")
    env_prefix: ClassVar[str] = "SAM_"


class ApiSettings(Section):
    """The API server: request limits, listings, submits, log following, bulk changes."""

    # Largest request body the API accepts (413 above it).
    max_body_bytes: int = 1024 * 1024
    # Largest `limit` of a listing (GET /jobs and the like).
    max_page_size: int = 500
    # Rows per page of `GET /jobs?view=slim` (what `sam queue` reads): 10,000 jobs in one answer.
    listing_max_rows: int = Field(default=10_000, ge=1)
    # Submits per second per tenant (a token bucket; 429 above it); 0 = no limit.
    submit_rate_per_s: float = 0.0
    # Submits one server process works on at once (the rest wait on its event loop): 4 gave
    # ~1,200 submits/s at p99 ~30 ms where anyio's 40 threads gave ~870/s at ~95 ms.
    submit_concurrency: int = Field(default=4, ge=1)
    # Seconds between the database polls that serve every log, metrics and event follower.
    follow_poll_s: float = Field(default=0.5, gt=0)
    # Seconds of quiet after which a stream gets an SSE comment (keeps proxies from closing it).
    follow_heartbeat_s: float = Field(default=15.0, gt=0)
    # Rows one transaction of a bulk change writes (an array's submit, cancel, hold, release,
    # requeue; artifact reuse) before it commits and lets other tenants' requests in.
    bulk_chunk_rows: int = Field(default=2000, ge=1, le=30_000)
    # Pause between a bulk change's transactions; unset: 0.1 s on SQLite (one writer at a time),
    # none on PostgreSQL (row locks let the others through).
    bulk_pause_s: float | None = Field(default=None, ge=0, le=10)
    # Unfinished jobs (array tasks count one each) a tenant may have; a submit past it is a 429
    # that says how many it has. A tenant quota's max_queued_jobs, where set, is used instead.
    max_queued_jobs: int = Field(default=200_000, ge=1)
    # Tasks one array may have (Slurm's MaxArraySize); a larger --array is a 422.
    max_array_tasks: int = Field(default=100_000, ge=1, le=1_000_000)


class SchedulerSettings(Section):
    """The scheduler: its cycle, requeues, preemption, suspension, drain stop, history purge."""

    # Seconds between planning cycles when no job event wakes the scheduler earlier.
    scheduler_interval_s: float = 1.0
    # Attempts lost to dead workers before a job fails with worker_lost.
    max_attempts: int = 3
    # Slurm's kill_invalid_depend for the whole cluster: cancel a job whose dependency can
    # never be met (a job can also ask for it with `kill_invalid_depend: true`).
    kill_invalid_depend: bool = False
    # Seconds a job runs at least before it may be preempted.
    preempt_min_run_s: float = 60.0
    # Preemptions, migrations and suspensions one job may suffer in all.
    max_preemptions_per_job: int = 3
    # A compile server silent this long is removed from the cluster view (offline after 3 beats).
    compile_server_expire_s: float = 300.0
    # Compile slots one tenant may hold at once; 0 = all but one when there are several (one
    # tenant's slow models then never hold every slot while another tenant's compile waits).
    compile_slots_per_tenant: int = Field(default=0, ge=0)
    # Logs and step metrics of jobs ended longer ago than this are deleted (the job row, its
    # attempts and its summary stay, for accounting); 0 = keep forever.
    history_retention_days: float = Field(default=30.0, ge=0)
    # Seconds between the scheduler's checks for history to purge.
    history_purge_every_s: float = Field(default=300.0, gt=0)

    # The scheduling profile the scheduler runs: default, easy or fcfs (docs/architecture.md,
    # "The scheduling framework").
    scheduler_profile: str = "default"
    # Changes to the profile's plugin arguments, {plugin: {argument: value}} (JSON in the
    # variable), e.g. {"preempt": {"suspend_factor": 0}} turns selective suspension off;
    # "cycle" names the arguments all plugins share. Unset: the profile's own.
    scheduler_plugin_args: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("scheduler_plugin_args", mode="before")
    @classmethod
    def _json_plugin_args(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"SAM_SCHEDULER_PLUGIN_ARGS is not JSON: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _profile_runs(self) -> SchedulerSettings:
        self.profile()  # an unknown profile, plugin or argument, or a value of the wrong type
        return self

    def profile(self) -> Profile:
        """The scheduling profile these settings name, with their argument changes."""
        from sam_server.scheduling.framework.args import profile_from_settings

        cycle = {
            "min_run_before_preempt_s": self.preempt_min_run_s,
            "max_preemptions_per_job": self.max_preemptions_per_job,
        }
        return profile_from_settings(self.scheduler_profile, cycle, self.scheduler_plugin_args)


class WorkerSettings(Section):
    """Compile and wafer workers: leases, heartbeats, memory, recycling."""

    # Seconds a worker's claim on a job lasts without renewal before the job is requeued.
    lease_s: float = 30.0
    # Seconds between a worker's lease renewals and heartbeats.
    heartbeat_s: float = 5.0
    # A training log line every N steps (every step's numbers are in `sam metrics`).
    log_every_steps: int = Field(default=100, ge=1)
    # Host memory one wafer job may plan to hold (its checked artifact's state, batch and op
    # outputs); a job planned above it fails host_oom before it runs.
    wafer_job_memory_bytes: int = Field(default=4 * 1024**3, ge=1)
    # RLIMIT_DATA of a wafer worker process; 0 = auto: its job slots x wafer_job_memory_bytes
    # + 2 GiB, at most 90% of the machine's memory (a step past it fails host_oom, not the worker).
    wafer_worker_memory_bytes: int = Field(default=0, ge=0)
    # A compile or wafer worker whose RSS passes this after a task finishes the tasks it runs,
    # takes no new one and exits, to be started afresh by its supervisor; 0 = never.
    worker_recycle_rss_bytes: int = Field(default=2 * 1024**3, ge=0)


class StorageSettings(Section):
    """Projects, data sets, step metrics and checkpoints as stored."""

    # Projects and data sets move in content-addressed chunks of this size (the largest chunk
    # body the server takes; docs/projects.md).
    upload_chunk_bytes: int = Field(default=8 << 20, ge=64 << 10, le=256 << 20)
    # The largest single file of a project or data set.
    max_file_bytes: int = Field(default=4 << 30, ge=1)
    # The most bytes one project (one `sam submit`) may hold; big data goes in a data set.
    max_project_bytes: int = Field(default=8 << 30, ge=1)
    # The most files one project or data set may hold.
    max_project_files: int = Field(default=10_000, ge=1)
    # The bytes a tenant may store (its projects' and data sets' chunks, each once) when its
    # quota sets no max_storage_bytes.
    max_storage_bytes: int = Field(default=50 << 30, ge=0)
    # A project version (what one `sam submit` uploaded) is kept while a job naming it has not
    # ended, and for this many days after the later of its last commit and its last job's end
    # (so an unchanged resubmit sends nothing); then the chunks no other project version or
    # data set uses are freed and leave the tenant's stored bytes. An upload that would pass
    # the tenant's storage limit frees the versions whose jobs have all ended first, however
    # recent. 0 = free a version as soon as its last job ends.
    project_retention_days: float = Field(default=3.0, ge=0)
    # Chunks and project versions an upload or a submit claimed this recently are never freed
    # (it covers the time between a client's "which chunks are missing?" and its commit).
    upload_grace_s: float = Field(default=3600.0, ge=0)
    # Seconds between the scheduler's collections of project versions past their retention.
    storage_gc_every_s: float = Field(default=600.0, gt=0)
    # The newest steps of a job kept as plain rows of step metrics.
    metrics_recent_steps: int = Field(default=200, ge=1)
    # Older steps are packed this many to a compressed row.
    metrics_chunk_steps: int = Field(default=500, ge=1)
    # Newest checkpoints kept per job.
    checkpoint_keep: int = Field(default=3, ge=1)


class MetricsSettings(Section):
    """The /metrics endpoints of the processes other than the API."""

    # Bearer token Prometheus sends to read the /metrics series that name tenants (the API's and
    # the scheduler's); without it a scrape gets the cluster-wide series only.
    metrics_token: str | None = None
    # Host on which processes other than the API serve /metrics.
    metrics_host: str = "127.0.0.1"
    # Port of the scheduler's /metrics; 0 = off.
    scheduler_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Port of the compile servers' /metrics: the first such process of `sam up` serves on this
    # port, the next on port + 1, ...; 0 = off.
    compile_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Port of the wafer workers' /metrics (numbered as the compile servers'); 0 = off.
    wafer_metrics_port: int = Field(default=0, ge=0, le=65535)


class SandboxSettings(Section):
    """The sandbox that runs tenant code (docs/sandbox.md); SAM_SANDBOX_<NAME>."""

    env_prefix: ClassVar[str] = "SAM_SANDBOX_"
    # The bubblewrap binary; unset: the one on PATH, else /usr/bin/bwrap.
    bwrap: str | None = None
    # The first uid of the pool sandboxes run as (one uid per running sandbox).
    uid_base: int = Field(default=61000, ge=1000)
    # The number of uids in that pool: the most sandboxes one machine runs at once.
    uid_count: int = Field(default=64, ge=1)
    # Start sandboxes through the worker's spawner helper (no fork of the big worker process);
    # false: fork bwrap from the worker itself.
    spawner: bool = True
    # Keep one sandbox pre-started for the next trace in compile workers.
    warm: bool = True
    # The largest array a make_batch may send, in bytes.
    max_frame_bytes: int = Field(default=256 * 1024**2, ge=1)
    # A worker not running as root runs tenant code under its own uid only if this is true (the
    # code could then signal, ptrace or read the worker; logged at start); false: it refuses it.
    allow_shared_uid: bool = False

    def options(self) -> SandboxOptions:
        """These settings as the compiler's sandbox takes them."""
        return SandboxOptions(**self.model_dump())


SECTIONS = ("api", "scheduler", "worker", "storage", "metrics", "sandbox")


class Settings(BaseSettings):
    """SAM's configuration, one tree: the few settings every process needs at the top, then one
    section per subsystem. Read once when a process starts (`get_settings`) and passed in.

    Sources, strongest first: the constructor's arguments (a command's flags), the environment
    (SAM_<NAME>; the sandbox's SAM_SANDBOX_<NAME>), the YAML file named by SAM_SETTINGS_FILE
    (the same tree: top-level keys and one mapping per section), the defaults below."""

    model_config = SettingsConfigDict(env_prefix="SAM_", extra="forbid")

    # development or production; production refuses to start without a strong SAM_ADMIN_TOKEN
    # (no known default, at least 24 characters) or with a weak SAM_METRICS_TOKEN.
    env: Literal["development", "production"] = "development"
    # Artifacts, checkpoints, logs, reports, the SQLite database and the embedded broker.
    data_dir: Path = Path("./sam-data")
    # SQLAlchemy URL of the database (postgresql://...); unset: SQLite under SAM_DATA_DIR.
    database_url: str | None = None
    # Celery broker URL (redis://...); unset: the embedded filesystem broker under SAM_DATA_DIR.
    broker_url: str | None = None
    # The cluster admin's token; unset in development: one is generated into admin.token.
    admin_token: str | None = None
    # The cluster file (wafers, compile servers, shared data sets); unset: two full WSE-2 wafers.
    cluster: Path | None = None
    # Level of the processes' logs (DEBUG, INFO, WARNING, ERROR).
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # The packages whose callables a job's model.factory may name (besides modules of the job's
    # own project), e.g. torchvision.models.resnet18: checked at submit and in the compile
    # sandbox. Comma-separated in the environment (SAM_MODEL_FACTORY_PACKAGES=torchvision,timm).
    model_factory_packages: list[str] = Field(
        default_factory=lambda: ["torchvision", "timm", "transformers", "torchaudio"]
    )

    api: ApiSettings = Field(default_factory=ApiSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvSource(settings_cls), _FileSource(settings_cls))

    def model_copy(self, *, update: Mapping[str, object] | None = None, deep: bool = False) -> Self:
        """pydantic's copy, refusing a name that is not a top-level field (a section's setting
        given flat would otherwise be stored beside the tree and silently ignored)."""
        unknown = sorted(set(update or {}) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"not top-level settings: {unknown}; use settings.updated(...)")
        return super().model_copy(update=update, deep=deep)

    def updated(self, **changes: Any) -> Settings:
        """These settings with some changed, each named by its field name alone (lease_s=5)."""
        return updated(self, **changes)

    @model_validator(mode="before")
    @classmethod
    def _route_flat_names(cls, data: object) -> object:
        """A section's setting given by its name alone (Settings(lease_s=5), as a command's flag
        or a test passes it) goes into its section, over what the environment or file said."""
        if not isinstance(data, dict):
            return data
        where = {name: section for section, name, _ in setting_names() if section}
        routed = {key: value for key, value in data.items() if key not in where}
        for key, value in data.items():
            section = where.get(key)
            if section is not None:
                inner = routed.get(section)
                routed[section] = {**(inner if isinstance(inner, dict) else {}), key: value}
        return routed

    @field_validator("model_factory_packages", mode="before")
    @classmethod
    def _package_list(cls, value: object) -> object:
        if isinstance(value, str):
            value = [p.strip() for p in value.strip("[]").replace('"', "").split(",") if p.strip()]
        if isinstance(value, list) and not all(
            isinstance(p, str) and p.isidentifier() for p in value
        ):
            raise ValueError("model_factory_packages are top-level package names, e.g. timm")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _no_default_secrets(self) -> Settings:
        if self.env != "production":
            return self
        if not self.admin_token:
            raise ValueError(
                "SAM_ADMIN_TOKEN must be set when SAM_ENV=production: "
                + _MAKE_ONE.format(name="SAM_ADMIN_TOKEN")
            )
        for name, value in (
            ("SAM_ADMIN_TOKEN", self.admin_token),
            ("SAM_METRICS_TOKEN", self.metrics.metrics_token),
        ):
            why = weak_secret(value)
            if why:
                raise ValueError(
                    f"{name} {why}; SAM_ENV=production refuses it: {_MAKE_ONE.format(name=name)}"
                )
        return self

    @property
    def resolved_database_url(self) -> str:
        """The database URL; SQLite under the data directory unless SAM_DATABASE_URL is set."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'sam.db').resolve()}"

    @property
    def shown_database_url(self) -> str:
        """The database URL as SAM prints it: the password replaced by ***."""
        return redact_url(self.resolved_database_url)

    @property
    def resolved_broker_url(self) -> str:
        """Celery broker URL; the embedded filesystem transport unless SAM_BROKER_URL is set."""
        return self.broker_url or "filesystem://"

    @property
    def broker_dir(self) -> Path:
        return (self.data_dir / "broker").resolve()

    def ensure_admin_token(self) -> str:
        """The admin token: SAM_ADMIN_TOKEN, or in development one kept in the data directory."""
        if self.admin_token:
            return self.admin_token
        path = self.data_dir / "admin.token"
        if path.exists():
            return path.read_text().strip()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        token = "sam_admin_" + secrets.token_urlsafe(24)
        path.write_text(token + "\n")
        path.chmod(0o600)
        return token

    def load_cluster(self) -> ClusterConfig:
        """The cluster file named by SAM_CLUSTER, or the default two full WSE-2 wafers."""
        if self.cluster is None:
            return DEFAULT_CLUSTER
        try:
            return ClusterConfig.model_validate(cluster_yaml(Path(self.cluster)))
        except (OSError, yaml.YAMLError, ValueError) as exc:
            raise ConfigError(f"cannot load the cluster file {self.cluster}: {exc}") from exc


# Tokens that shipped as defaults (docker-compose.yml had the first) or that anyone would guess.
KNOWN_DEFAULT_SECRETS = frozenset(
    {"sam-admin-change-me", "sam-grafana-change-me", "change-me", "changeme", "admin", "secret"}
)
MIN_SECRET_CHARS = 24
_MAKE_ONE = "set a random one, e.g. export {name}=$(openssl rand -hex 32)"


def weak_secret(value: str | None) -> str | None:
    """Why a production token is too weak to accept (a known default, short, or one repeated
    character or so), or None for a strong one or none at all."""
    if not value:
        return None
    if value.strip().lower() in KNOWN_DEFAULT_SECRETS or "change-me" in value.lower():
        return f"is a known default ({value.strip()!r})"
    if len(value) < MIN_SECRET_CHARS:
        return f"has {len(value)} characters (at least {MIN_SECRET_CHARS} needed)"
    if len(set(value)) < 8:
        return f"uses only {len(set(value))} distinct characters"
    return None


SETTINGS_FILE_ENV = "SAM_SETTINGS_FILE"


def _sections() -> dict[str, type[Section]]:
    """The section name -> its class."""
    found = {}
    for name in SECTIONS:
        annotation = Settings.model_fields[name].annotation
        assert isinstance(annotation, type) and issubclass(annotation, Section)
        found[name] = annotation
    return found


def setting_names() -> list[tuple[str | None, str, str]]:
    """Every leaf setting as (section or None for the top, field, environment variable), in the
    tree's order."""
    out: list[tuple[str | None, str, str]] = [
        (None, name, f"SAM_{name.upper()}")
        for name in Settings.model_fields
        if name not in SECTIONS
    ]
    for section, cls in _sections().items():
        out += [(section, name, f"{cls.env_prefix}{name.upper()}") for name in cls.model_fields]
    return out


def _environ() -> dict[str, str]:
    """The environment with upper-case names (SAM's variables are matched ignoring case)."""
    return {key.upper(): value for key, value in os.environ.items()}


class _EnvSource(PydanticBaseSettingsSource):
    """SAM_<NAME> of every setting, top-level or in a section, as the nested tree."""

    def get_field_value(self, field: object, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ reads them all at once

    def __call__(self) -> dict[str, object]:
        env = _environ()
        tree: dict[str, Any] = {}
        for section, name, var in setting_names():
            if var in env:
                (tree.setdefault(section, {}) if section else tree)[name] = env[var]
        return tree


def settings_file() -> Path | None:
    """The settings file SAM_SETTINGS_FILE names, if any."""
    value = _environ().get(SETTINGS_FILE_ENV)
    return Path(value) if value else None


def read_settings_file(path: Path) -> dict[str, object]:
    """The settings file's tree; a ConfigError names what is wrong with it."""
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the settings file {path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError(f"the settings file {path} must be a mapping of settings")
    known = set(Settings.model_fields)
    unknown = sorted(str(key) for key in loaded if key not in known)
    if unknown:
        raise ConfigError(
            f"the settings file {path} has unknown settings: {', '.join(unknown)} "
            f"(`sam config show` lists them all)"
        )
    return loaded


class _FileSource(PydanticBaseSettingsSource):
    """The YAML settings file named by SAM_SETTINGS_FILE (nothing when it is unset)."""

    def get_field_value(self, field: object, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError

    def __call__(self) -> dict[str, object]:
        path = settings_file()
        return read_settings_file(path) if path else {}


def updated(settings: Settings, **changes: Any) -> Settings:
    """`settings` with some settings changed, each named by its field name alone (lease_s,
    cluster): what a command's flags or a test override. Unknown names raise TypeError."""
    where = {name: section for section, name, _ in setting_names()}
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in changes.items():
        if name not in where:
            raise TypeError(f"{name!r} is not a setting")
        section = where[name]
        if section is None:
            top[name] = value
        else:
            nested.setdefault(section, {})[name] = value
    for section, values in nested.items():
        top[section] = getattr(settings, section).model_copy(update=values)
    return settings.model_copy(update=top)


def origins(settings: Settings) -> list[tuple[str, object, str]]:
    """Every effective setting as (dotted name, value, where it came from): the environment
    variable's name, the settings file, or "default"."""
    env = _environ()
    path = settings_file()
    from_file = read_settings_file(path) if path else {}
    out = []
    for section, name, var in setting_names():
        value = getattr(getattr(settings, section), name) if section else getattr(settings, name)
        in_file = from_file.get(section, {}) if section else from_file
        if var in env:
            source = var
        elif isinstance(in_file, dict) and name in in_file:
            source = f"file {path}"
        else:
            source = "default"
        out.append((f"{section}.{name}" if section else name, value, source))
    return out


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment (and the settings file);
    settings a process must not start with end it with one line that says which and why (not a
    traceback)."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}"
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise SystemExit(f"sam: cannot start: {problems}") from None


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***`, for logs and terminal output
    (postgresql://sam:secret@db/sam -> postgresql://sam:***@db/sam)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
