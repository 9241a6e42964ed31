"""indexes that let GET /jobs read a tenant's jobs and count its arrays without the table's rows

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ARRAY_TASKS = sa.text("array_job_id IS NOT NULL")


def upgrade() -> None:
    # A tenant's jobs newest first, with what decides whether a row is an array's waiting task:
    # a page skips those without reading their (wide) rows.
    op.create_index(
        "ix_jobs_tenant_seq", "jobs", ["tenant_id", "seq", "id", "state", "array_job_id"]
    )
    # An array's collapsed row counted from the index alone (array tasks only).
    op.create_index(
        "ix_jobs_tenant_array_tasks",
        "jobs",
        [
            "tenant_id",
            "array_job_id",
            "state",
            "reason",
            "hold",
            "seq",
            "array_task_id",
            "created_at",
        ],
        sqlite_where=ARRAY_TASKS,
        postgresql_where=ARRAY_TASKS,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_array_tasks", "jobs")
    op.drop_index("ix_jobs_tenant_seq", "jobs")
