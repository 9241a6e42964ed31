"""job accounting: one record per ended job, kept after the job row is purged

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
# The lead re-chains migrations at merge; 0006 is the newest on main when this was written.
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_accounting",
        sa.Column("job_id", sa.String(length=24), nullable=False),
        sa.Column("array_job_id", sa.String(length=24), nullable=True),
        sa.Column("array_task_id", sa.Integer(), nullable=True),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("exit_kind", sa.String(length=32), nullable=True),
        sa.Column("submit_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("elapsed_s", sa.Float(), nullable=False),
        sa.Column("time_limit_s", sa.Integer(), nullable=False),
        sa.Column("wafer_id", sa.String(length=64), nullable=True),
        sa.Column("region_row", sa.Integer(), nullable=True),
        sa.Column("region_col", sa.Integer(), nullable=True),
        sa.Column("region_rows", sa.Integer(), nullable=True),
        sa.Column("region_cols", sa.Integer(), nullable=True),
        sa.Column("pe_hours", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("intervals", sa.JSON(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_index("ix_job_accounting_tenant_end", "job_accounting", ["tenant_id", "end_at"])
    op.create_index("ix_job_accounting_end", "job_accounting", ["end_at"])
    op.create_index("ix_job_accounting_array_job_id", "job_accounting", ["array_job_id"])
    _backfill()


def _backfill() -> None:
    """Records for the jobs that ended before this migration, so `sam acct` misses none.

    Plain SQL over the columns this revision knows (never the ORM models, which may have
    gained columns a later migration adds)."""
    from datetime import UTC, datetime

    from sam_server.services.accounting import record_values

    bind = op.get_bind()
    ended = bind.execute(
        sa.text(
            "SELECT j.id, j.tenant_id, j.user_id, j.name, j.mode, j.priority, j.state,"
            " j.error_kind, j.created_at, j.started_at, j.finished_at, j.time_limit_s,"
            " j.attempts, t.name AS tenant, u.name AS user_name FROM jobs j"
            " JOIN tenants t ON t.id = j.tenant_id JOIN users u ON u.id = j.user_id"
            " WHERE j.state IN ('succeeded', 'failed', 'cancelled')"
        ).columns(**{k: _TIME for k in ("created_at", "started_at", "finished_at")})
    ).all()
    if not ended:
        return
    runs: dict[str, list[Any]] = {}
    for run in bind.execute(
        sa.text(
            'SELECT job_id, attempt, wafer_id, "row", "col", "rows", "cols", started_at, ended_at'
            " FROM job_attempts"
        ).columns(started_at=_TIME, ended_at=_TIME)
    ):
        runs.setdefault(run.job_id, []).append(run)
    now = datetime.now(UTC)
    rows = [
        record_values(
            job, tenant=job.tenant, user=job.user_name, attempts=runs.get(job.id, []), now=now
        )
        for job in ended
    ]
    types = {"intervals": sa.JSON(), **{k: sa.DateTime(timezone=True) for k in _TIMES}}
    table = sa.table("job_accounting", *(sa.column(k, types.get(k)) for k in rows[0]))
    op.bulk_insert(table, rows)


_TIMES = ("submit_at", "start_at", "end_at", "recorded_at")
_TIME = sa.DateTime(timezone=True)


def downgrade() -> None:
    op.drop_index("ix_job_accounting_array_job_id", table_name="job_accounting")
    op.drop_index("ix_job_accounting_end", table_name="job_accounting")
    op.drop_index("ix_job_accounting_tenant_end", table_name="job_accounting")
    op.drop_table("job_accounting")
