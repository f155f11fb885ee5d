"""The tables of :class:`~deputy_shiny.persistence.sql_store.SqlStore` (SQLAlchemy Core).

The live schema of the code; the Alembic migrations in
:mod:`deputy_shiny.persistence.migrations` build the same tables in a database (a test
compares the two). Every name starts with ``deputy_`` so the tables can share a
database with an app's own. Times are Unix seconds (floats), payloads the canonical
JSON text the HMAC covers (stored as text, so the bytes checked are the bytes written).

Examples:
    >>> sorted(METADATA.tables)
    ['deputy_counters', 'deputy_leases', 'deputy_meta', 'deputy_records']
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["COUNTERS", "LEASES", "META", "METADATA", "RECORDS", "VERSION_TABLE"]

VERSION_TABLE = "deputy_alembic_version"
"""Alembic's revision table for these tables (its own name: an app's Alembic may share
the database)."""

METADATA = sa.MetaData()

RECORDS = sa.Table(
    "deputy_records",
    METADATA,
    sa.Column("kind", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("scope", sa.String(200), nullable=True),
    sa.Column("status", sa.String(200), nullable=True),
    sa.Column("payload", sa.Text(), nullable=False),
    sa.Column("mac", sa.String(80), nullable=False),
    sa.Column("revision", sa.Integer(), nullable=False),
    sa.Column("updated_at", sa.Float(), nullable=False),
    sa.Index("deputy_records_scope", "scope"),
    sa.Index("deputy_records_updated", "updated_at"),
)

LEASES = sa.Table(
    "deputy_leases",
    METADATA,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    sa.Column("token", sa.Integer(), nullable=False),
    sa.Column("expires_at", sa.Float(), nullable=False),
)

COUNTERS = sa.Table(
    "deputy_counters",
    METADATA,
    sa.Column("user", sa.String(500), primary_key=True),
    sa.Column("day", sa.String(32), primary_key=True),
    sa.Column("metric", sa.String(64), primary_key=True),
    sa.Column("total", sa.Float(), nullable=False),
    sa.Column("updated_at", sa.Float(), nullable=False),
)

META = sa.Table(
    "deputy_meta",
    METADATA,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Float(), nullable=False),
)
