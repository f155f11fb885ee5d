"""Fixtures every test folder may use: a real PostgreSQL server (started once, on first
use, and stopped at the end of the session)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
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


@pytest.fixture(scope="session", autouse=True)
def _sandbox_leaves_nothing_behind() -> Iterator[None]:
    """Sandboxed calls as root leave no cgroup directory and no uid record on the machine.

    The record of which workspace holds which uid (see deputy_shiny/sandbox/_uids.py)
    goes to a temporary directory; the ``deputy_shiny`` cgroup directories this process
    made are removed at the end (where no other process still uses them).
    """
    claims = tempfile.mkdtemp(prefix="deputy-uid-claims-")
    before = os.environ.get("DEPUTY_SANDBOX_UID_CLAIMS")
    os.environ["DEPUTY_SANDBOX_UID_CLAIMS"] = claims
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DEPUTY_SANDBOX_UID_CLAIMS", None)
        else:
            os.environ["DEPUTY_SANDBOX_UID_CLAIMS"] = before
        shutil.rmtree(claims, ignore_errors=True)
        sandbox = sys.modules.get("deputy_shiny.sandbox._sandbox")
        if sandbox is not None:
            sandbox._remove_made_parents()
