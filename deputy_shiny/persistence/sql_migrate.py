"""Bring a database's schema to this deputy_shiny's, with the Alembic migrations it ships.

:class:`~deputy_shiny.persistence.sql_store.SqlStore` checks the schema before its first
use (:func:`ensure_schema`): a database at this code's revision is used as is; an empty
or older one is migrated (or, with ``auto_migrate=False``, refused with a
:class:`~deputy_shiny.errors.StoreSchemaError` naming the command below); one migrated
by a newer deputy_shiny (a revision this code does not know) is always refused. Several
processes starting together on one PostgreSQL database migrate it once: the check and
the migration hold a transaction-scoped advisory lock; on a SQLite file an OS lock on a
file beside it does the same.

To migrate by hand (e.g. before a deploy whose app runs with ``auto_migrate=False``)::

    python -m deputy_shiny.persistence.sql_migrate 'postgresql://user@host/db'

(no argument: the URL in ``DEPUTY_STORE_URL``).

Examples:
    >>> head_revision()
    '0001'
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import ConfigurationError, StoreSchemaError
from .migrations import SCRIPT_LOCATION
from .sql_schema import VERSION_TABLE

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "MIGRATE_COMMAND",
    "ensure_schema",
    "head_revision",
    "main",
    "store_url",
    "upgrade",
]

MIGRATE_COMMAND = "python -m deputy_shiny.persistence.sql_migrate"
"""The command that migrates a database by hand (the URL follows it)."""

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}
_LOCK_ID = 0x6465707574790001  # "deputy" + 1: the advisory lock of the migration
_SCRIPTS: list[ScriptDirectory] = []


def store_url(url: str | sa.URL) -> sa.URL:
    """``url`` with its async driver (a ConfigurationError for other databases).

    Examples:
        >>> store_url("postgresql://app@db.internal/deputy").drivername
        'postgresql+psycopg'
    """
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"Not a SQLAlchemy database URL ({exc}).") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ConfigurationError(
            f"SqlStore works on SQLite (sqlite+aiosqlite://) and PostgreSQL "
            f"(postgresql+psycopg://), not {parsed.drivername!r}."
        )
    return parsed.set(drivername=driver)


def _script() -> ScriptDirectory:
    if not _SCRIPTS:
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", str(SCRIPT_LOCATION))
        _SCRIPTS.append(ScriptDirectory.from_config(config))
    return _SCRIPTS[0]


def head_revision() -> str:
    """The schema revision this deputy_shiny's code is written for."""
    head = _script().get_current_head()
    assert head is not None
    return head


def _current(connection: sa.Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _run_upgrade(connection: sa.Connection) -> None:
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext

    script = _script()
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))

    def steps(revision: Any, _context: Any) -> Any:
        return script._upgrade_revs("head", revision)

    with EnvironmentContext(config, script, fn=steps, destination_rev="head") as env:
        env.configure(connection=connection, version_table=VERSION_TABLE)
        with env.begin_transaction():
            env.run_migrations()


def _check(connection: sa.Connection, shown_url: str, auto_migrate: bool) -> None:
    """Migrate or refuse (see the module); runs inside the migration lock."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_LOCK_ID)))
    current, head = _current(connection), head_revision()
    if current == head:
        return
    if current is not None:
        from alembic.util import CommandError

        try:
            _script().get_revision(current)
        except CommandError:
            raise StoreSchemaError(
                f"The database {shown_url} has schema revision {current!r}, which this "
                f"deputy_shiny does not know (it knows up to {head!r}): a newer deputy_shiny "
                "migrated it. Upgrade deputy_shiny; the database is not used."
            ) from None
    if not auto_migrate:
        found = "no deputy_shiny schema" if current is None else f"schema revision {current!r}"
        raise StoreSchemaError(
            f"The database {shown_url} has {found}; this deputy_shiny needs revision "
            f"{head!r} and automatic migration is off. Migrate it with: "
            f"{MIGRATE_COMMAND} '{shown_url}'"
        )
    _run_upgrade(connection)


@contextlib.contextmanager
def _file_lock(engine: AsyncEngine) -> Iterator[None]:
    """An OS lock beside a SQLite database file (nothing for other databases)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{database}.migrate-lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


async def ensure_schema(engine: AsyncEngine, *, auto_migrate: bool = True) -> None:
    """Check the database's schema and migrate it when allowed (see the module).

    Raises:
        StoreSchemaError: the schema is newer than the code, or older and
            ``auto_migrate`` is False.
    """
    import asyncio

    shown = engine.url.render_as_string(hide_password=True)
    lock = _file_lock(engine)
    await asyncio.to_thread(lock.__enter__)  # a blocking flock: not on the loop
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_check, shown, auto_migrate)
    finally:
        lock.__exit__(None, None, None)


async def upgrade(url: str) -> str:
    """Migrate the database at ``url`` to this code's revision; returns the revision."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(store_url(url))
    try:
        await ensure_schema(engine, auto_migrate=True)
    finally:
        await engine.dispose()
    return head_revision()


def main(argv: list[str] | None = None) -> int:
    """``python -m deputy_shiny.persistence.sql_migrate [URL]``: migrate, print the revision."""
    import asyncio

    args = sys.argv[1:] if argv is None else argv
    url = args[0] if args else os.environ.get("DEPUTY_STORE_URL", "")
    if not url or len(args) > 1 or url.startswith("-"):
        print(f"usage: {MIGRATE_COMMAND} URL  (or set DEPUTY_STORE_URL)", file=sys.stderr)
        return 2
    revision = asyncio.run(upgrade(url))
    print(f"deputy_shiny schema at revision {revision}")
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
