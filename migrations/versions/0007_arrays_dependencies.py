"""job arrays, dependencies and holds: array columns on jobs, a job_arrays table

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
# The lead re-chains migrations at merge; 0006 is the newest on main when this was written.
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("array_job_id", sa.String(length=24), nullable=True))
        batch_op.add_column(sa.Column("array_task_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_max_running", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("hold", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("dependency", sa.String(length=1024), nullable=True))
        batch_op.add_column(
            sa.Column(
                "kill_invalid_depend", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
        batch_op.create_index("ix_jobs_array_job_id", ["array_job_id"], unique=False)
    op.create_table(
        "job_arrays",
        sa.Column("id", sa.String(length=24), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("indices", sa.Text(), nullable=False),
        sa.Column("task_count", sa.Integer(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("job_arrays")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_array_job_id")
        for column in (
            "kill_invalid_depend",
            "dependency",
            "hold",
            "array_max_running",
            "array_task_id",
            "array_job_id",
        ):
            batch_op.drop_column(column)
