"""the job a preempted (suspended) job was stopped for

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("preempted_for", sa.String(24)))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("preempted_for")
