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


_UID_CLAIMS = "DEPUTY_SANDBOX_UID_CLAIMS"
_claims_before: list[str | None] = []


def pytest_configure(config: pytest.Config) -> None:
    """Sandboxed calls as root leave no uid record on the machine: the record of which
    workspace holds which uid (deputy_shiny/sandbox/_uids.py) goes to a temporary
    directory, set before any app server is started (e2e servers start at collection)."""
    if hasattr(config, "workerinput") and os.environ.get(_UID_CLAIMS):
        return  # a worker of pytest -n shares its controller's record (set before it)
    _claims_before.append(os.environ.get(_UID_CLAIMS))
    os.environ[_UID_CLAIMS] = tempfile.mkdtemp(prefix="deputy-uid-claims-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the uid record and the ``deputy_shiny`` cgroup directories this process made
    (where no other process still uses them)."""
    if _claims_before:  # a worker of pytest -n leaves its controller's record alone
        shutil.rmtree(os.environ.get(_UID_CLAIMS, ""), ignore_errors=True)
        before = _claims_before.pop()
        if before is None:
            os.environ.pop(_UID_CLAIMS, None)
        else:
            os.environ[_UID_CLAIMS] = before
    cgroups = sys.modules.get("deputy_shiny.sandbox._cgroups")
    if cgroups is not None:
        cgroups._remove_made_parents()
