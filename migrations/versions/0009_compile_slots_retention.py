"""compile slots per compile server; when an ended job's logs and metrics were purged

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
# The lead re-chains migrations at merge; 0006 is the newest on main when this was written.
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("compile_servers") as batch:
        batch.add_column(sa.Column("slots", sa.Integer(), nullable=False, server_default="1"))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("history_purged_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("history_summary", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("history_summary")
        batch.drop_column("history_purged_at")
    with op.batch_alter_table("compile_servers") as batch:
        batch.drop_column("slots")
