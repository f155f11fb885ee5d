"""Fixtures every test folder may use: a real PostgreSQL server (started once, on first
use, and stopped at the end of the session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._postgres import PostgresServer, start_postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session (see tests/_postgres.py)."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty PostgreSQL database for this test: its SQLAlchemy URL."""
    return postgres_server.database()
