"""SQLAlchemy 2.0 models. The database is SAM's source of truth (docs/architecture.md, "Decisions").

Only `sam_server.services.transitions.transition` writes `Job.state`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from sam_domain.json_value import JsonObject
from sam_server.db.types import utcnow
from sam_server.states import JobState


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    max_pes: Mapped[int | None] = mapped_column(BigInteger)
    max_running_jobs: Mapped[int | None] = mapped_column(Integer)
    max_queued_jobs: Mapped[int | None] = mapped_column(Integer)
    share: Mapped[float] = mapped_column(Float, default=1.0)
    max_storage_bytes: Mapped[int | None] = mapped_column(BigInteger)
    storage_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    usage_pe_s: Mapped[float] = mapped_column(Float, default=0.0)
    usage_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class User(Base):
    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_users_tenant_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    tenant_id: Mapped[int | None] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16), default="user")
    usage_pe_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    tenant: Mapped[Tenant | None] = relationship(lazy="joined")


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Stamped at most once a minute (a write per request would cost every call a commit).
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The token of SAM_ADMIN_TOKEN: a new value at start-up revokes the previous one.
    bootstrap: Mapped[bool] = mapped_column(Boolean, default=False)

    user: Mapped[User] = relationship(lazy="joined")


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idem"),
        Index("ix_jobs_state_created", "state", "created_at"),
        Index("ix_jobs_tenant_created", "tenant_id", "created_at"),
        # GET /jobs (services/listing.py): a tenant's page newest first, skipping its arrays'
        # waiting tasks from the index; the arrays' collapsed rows counted from the index alone.
        Index("ix_jobs_tenant_seq", "tenant_id", "seq", "id", "state", "array_job_id"),
        Index(
            "ix_jobs_tenant_array_tasks",
            "tenant_id",
            "array_job_id",
            "state",
            "reason",
            "hold",
            "seq",
            "array_task_id",
            "created_at",
            sqlite_where=text("array_job_id IS NOT NULL"),
            postgresql_where=text("array_job_id IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(24), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, index=True)  # submit order, for FIFO tie-breaks
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED.value)
    priority: Mapped[str] = mapped_column(String(8), default="normal")
    mode: Mapped[str] = mapped_column(String(16), default="train")
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    files: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    req_rows: Mapped[int] = mapped_column(Integer)
    req_cols: Mapped[int] = mapped_column(Integer)
    time_limit_s: Mapped[int] = mapped_column(Integer)
    total_steps: Mapped[int] = mapped_column(Integer, default=0)
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    eligible_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lost_attempts: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str | None] = mapped_column(String(64))
    explain: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The region the job holds while running (null otherwise).
    wafer_id: Mapped[str | None] = mapped_column(String(64))
    region_row: Mapped[int | None] = mapped_column(Integer)
    region_col: Mapped[int | None] = mapped_column(Integer)
    region_rows: Mapped[int | None] = mapped_column(Integer)
    region_cols: Mapped[int | None] = mapped_column(Integer)
    progress_step: Mapped[int] = mapped_column(Integer, default=0)
    progress_loss: Mapped[float | None] = mapped_column(Float)
    error_kind: Mapped[str | None] = mapped_column(String(32))
    error_message: Mapped[str | None] = mapped_column(Text)
    compile_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    compile_key: Mapped[str | None] = mapped_column(String(128))
    compile_cache_hit: Mapped[bool | None] = mapped_column(Boolean)
    compile_seconds: Mapped[float | None] = mapped_column(Float)
    compile_summary: Mapped[JsonObject | None] = mapped_column(JSON)  # cap_json's
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    checkpoint_step: Mapped[int | None] = mapped_column(Integer)
    # The SHA-256 of that checkpoint's .npz, as the worker that wrote it recorded it: a resume
    # loads only the checkpoint the database names, and only if it still has this hash.
    checkpoint_sha256: Mapped[str | None] = mapped_column(String(64))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    preempt_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    preempt_count: Mapped[int] = mapped_column(Integer, default=0)
    last_preempted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The job it was last preempted for: that job goes first once the region is back.
    preempted_for: Mapped[str | None] = mapped_column(String(24))
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    version: Mapped[int] = mapped_column(Integer, default=0)
    # Set when retention deleted this ended job's logs and metrics (the row itself is kept).
    history_purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What the purge removed: log lines, steps, total simulated cycles, final loss.
    history_summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Job arrays, dependencies and holds (issue 13): a task of an array has the array's id and
    # its index; `array_max_running` is the array's `%N` (tasks running at once), on every task.
    array_job_id: Mapped[str | None] = mapped_column(String(24), index=True)
    array_task_id: Mapped[int | None] = mapped_column(Integer)
    array_max_running: Mapped[int | None] = mapped_column(Integer)
    # "user" or "admin" while held (Slurm's JobHeldUser / JobHeldAdmin); null otherwise.
    hold: Mapped[str | None] = mapped_column(String(8))
    # Slurm's --dependency text, e.g. "afterok:j1:j2,singleton"; null: none.
    dependency: Mapped[str | None] = mapped_column(String(1024))
    kill_invalid_depend: Mapped[bool] = mapped_column(Boolean, default=False)

    tenant: Mapped[Tenant] = relationship(lazy="joined")
    user: Mapped[User] = relationship(lazy="joined")


class JobArray(Base):
    """A job array: what its tasks share. The uploaded files are kept here once, not per task
    (an array of 10,000 tasks would otherwise store 10,000 copies)."""

    __tablename__ = "job_arrays"

    id: Mapped[str] = mapped_column(String(24), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    indices: Mapped[str] = mapped_column(Text)  # the --array text, e.g. "0-99%10"
    task_count: Mapped[int] = mapped_column(Integer)
    max_running: Mapped[int | None] = mapped_column(Integer)
    files: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JobEvent(Base):
    """One state transition of a job: the audit trail."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)


class JobLog(Base):
    """One log line of a job, in order."""

    __tablename__ = "job_logs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    level: Mapped[str] = mapped_column(String(8), default="INFO")
    line: Mapped[str] = mapped_column(Text)


class JobMetric(Base):
    """Per-step training metrics, step 0 first."""

    __tablename__ = "job_metrics"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    # null when the loss was not finite; `loss_nonfinite` then says which ("nan", "inf", "-inf")
    loss: Mapped[float | None] = mapped_column(Float)
    loss_nonfinite: Mapped[str | None] = mapped_column(String(8))
    sim_cycles: Mapped[int] = mapped_column(BigInteger)
    samples_per_sec: Mapped[float] = mapped_column(Float)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    # Share of the step's predictions (argmax of the logits) equal to the targets; null when
    # the loss is not a classification loss.
    accuracy: Mapped[float | None] = mapped_column(Float)


class JobMetricChunk(Base):
    """Older steps of a job's metrics, packed: a zlib-compressed run of consecutive steps
    (`sam_server.services.history` writes and reads them; recent steps stay in job_metrics)."""

    __tablename__ = "job_metric_chunks"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    first_step: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_step: Mapped[int] = mapped_column(Integer)
    sim_cycles: Mapped[int] = mapped_column(BigInteger)  # their sum, for totals without unpacking
    data: Mapped[bytes] = mapped_column(LargeBinary)


class JobAttempt(Base):
    """One run of a job on a wafer region: the allocation history."""

    __tablename__ = "job_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    tenant_id: Mapped[int] = mapped_column(Integer)
    wafer_id: Mapped[str] = mapped_column(String(64), index=True)
    row: Mapped[int] = mapped_column(Integer)
    col: Mapped[int] = mapped_column(Integer)
    rows: Mapped[int] = mapped_column(Integer)
    cols: Mapped[int] = mapped_column(Integer)
    placed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    worker: Mapped[str | None] = mapped_column(String(128))
    start_step: Mapped[int] = mapped_column(Integer, default=0)
    outcome: Mapped[str | None] = mapped_column(String(32))


class Wafer(Base):
    """A simulated wafer, registered from the cluster file; its worker heartbeats."""

    __tablename__ = "wafers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    arch: Mapped[str] = mapped_column(String(8))
    rows: Mapped[int] = mapped_column(Integer)
    cols: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="offline")
    worker: Mapped[str | None] = mapped_column(String(128))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    registered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CompileServer(Base):
    """A compile worker process, known by its heartbeats."""

    __tablename__ = "compile_servers"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    busy: Mapped[int] = mapped_column(Integer, default=0)
    compiles: Mapped[int] = mapped_column(Integer, default=0)
    cache_hits: Mapped[int] = mapped_column(Integer, default=0)
    slots: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # compiles at once


class OutboxMessage(Base):
    """A Celery message decided in a committed transaction, sent after commit (transactional outbox)."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task: Mapped[str] = mapped_column(String(128))
    queue: Mapped[str] = mapped_column(String(128))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)


class JobAccounting(Base):
    """A job's accounting record (sacct's), written when the job ends and again if it ends again
    after a requeue. No foreign key: it outlives the job row, its logs and metrics (retention),
    the user and the tenant, so names are copied, not referenced."""

    __tablename__ = "job_accounting"
    __table_args__ = (
        Index("ix_job_accounting_tenant_end", "tenant_id", "end_at"),
        Index("ix_job_accounting_end", "end_at"),
    )

    job_id: Mapped[str] = mapped_column(String(24), primary_key=True)
    # One row per array task; the array's parent id and the task's index (null for plain jobs).
    array_job_id: Mapped[str | None] = mapped_column(String(24), index=True)
    array_task_id: Mapped[int | None] = mapped_column(Integer)
    tenant_id: Mapped[int] = mapped_column(Integer)
    tenant: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[int] = mapped_column(Integer)
    user: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    mode: Mapped[str] = mapped_column(String(16))
    priority: Mapped[str] = mapped_column(String(8))
    state: Mapped[str] = mapped_column(String(16))
    exit_kind: Mapped[str | None] = mapped_column(String(32))
    submit_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    start_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    end_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    time_limit_s: Mapped[int] = mapped_column(Integer)
    wafer_id: Mapped[str | None] = mapped_column(String(64))
    region_row: Mapped[int | None] = mapped_column(Integer)
    region_col: Mapped[int | None] = mapped_column(Integer)
    region_rows: Mapped[int | None] = mapped_column(Integer)
    region_cols: Mapped[int | None] = mapped_column(Integer)
    pe_hours: Mapped[float] = mapped_column(Float, default=0.0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Each run on a wafer as [start ISO, end ISO, PEs]: usage reports clip them to a period.
    intervals: Mapped[list[Any]] = mapped_column(JSON, default=list)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
