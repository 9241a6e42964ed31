"""a step's loss may be NaN or infinite: null loss plus loss_nonfinite

Revision ID: 0005
Revises: 0003
Create Date: 2026-12-01 01:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job_metrics", schema=None) as batch_op:
        batch_op.alter_column("loss", existing_type=sa.Float(), nullable=True)
        batch_op.add_column(sa.Column("loss_nonfinite", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_metrics", schema=None) as batch_op:
        batch_op.drop_column("loss_nonfinite")
        batch_op.alter_column("loss", existing_type=sa.Float(), nullable=False)
