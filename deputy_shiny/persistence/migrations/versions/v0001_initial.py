"""The first schema: records, leases, counters and the store's own bookkeeping.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the four tables (self-contained: never the live schema module, which moves on)."""
    op.create_table(
        "deputy_records",
        sa.Column("kind", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("scope", sa.String(200), nullable=True),
        sa.Column("status", sa.String(200), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("mac", sa.String(80), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("deputy_records_scope", "deputy_records", ["scope"])
    op.create_index("deputy_records_updated", "deputy_records", ["updated_at"])
    op.create_table(
        "deputy_leases",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("token", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "deputy_counters",
        sa.Column("user", sa.String(500), primary_key=True),
        sa.Column("day", sa.String(32), primary_key=True),
        sa.Column("metric", sa.String(64), primary_key=True),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "deputy_meta",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    """Drop them again."""
    for table in ("deputy_meta", "deputy_counters", "deputy_leases", "deputy_records"):
        op.drop_table(table)
