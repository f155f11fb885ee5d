"""A real PostgreSQL server for the tests: ``initdb`` in a temp dir, one loopback port.

:func:`start_postgres` makes a fresh cluster (trust authentication, reachable only on
127.0.0.1 and a unix socket in its own temp dir, durability off: it is thrown away),
starts ``postgres`` and waits until it answers. PostgreSQL refuses to run as root, so
under root the server runs as the ``postgres`` system user (Debian's package makes it),
or as a ``deputy-pg`` system user made for it. The server gets SIGQUIT (an immediate
shutdown) at the end, or if the test process dies. A missing PostgreSQL fails the tests
with how to install it: store tests are never skipped.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "deputy"  # the database superuser the tests connect as


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=_major)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    if on_path:
        return Path(on_path).parent
    pytest.fail(
        "PostgreSQL is not installed, and the store tests need a real server: "
        "apt-get install postgresql (scripts/test installs it).",
        pytrace=False,
    )


def _major(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def _run_as() -> list[str]:
    """The prefix that runs a command as a non-root user (nothing when not root)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "deputy-pg"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            break
    else:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "deputy-pg",
            ],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam("deputy-pg")
    return [
        "setpriv",
        f"--reuid={entry.pw_uid}",
        f"--regid={entry.pw_gid}",
        "--clear-groups",
        "--pdeathsig=QUIT",
        "--",
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server; :meth:`database` makes a fresh database on it."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, database: str) -> str:
        """A SQLAlchemy URL of ``database`` on this server (psycopg 3)."""
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database's URL (each test gets its own)."""
        import psycopg
        from psycopg import sql

        name = f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self._conninfo("postgres"), autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def _conninfo(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={database} connect_timeout=5"

    def stop(self) -> None:
        """An immediate shutdown (the data is thrown away), then the temp dir goes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """Make and start a throwaway cluster (see the module); fails the tests if it cannot."""
    bindir = _bin_dir()
    prefix = _run_as()
    directory = Path(tempfile.mkdtemp(prefix="deputy-pg-"))
    if prefix:
        uid, gid = int(prefix[1].split("=")[1]), int(prefix[2].split("=")[1])
        os.chown(directory, uid, gid)
    data = directory / "data"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
    initdb = subprocess.run(
        [*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", USER,
         "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
        capture_output=True, env=env, cwd=directory,
    )  # fmt: skip
    if initdb.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"initdb failed: {initdb.stderr.decode(errors='replace')}", pytrace=False)
    for _attempt in range(5):  # a port taken between the probe and the bind: another
        port = _free_port()
        log = open(directory / "postgres.log", "wb")  # noqa: SIM115 - the server writes it
        process = subprocess.Popen(
            [*prefix, str(bindir / "postgres"), "-D", str(data), "-p", str(port),
             "-k", str(directory), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=directory,
        )  # fmt: skip
        log.close()
        server = PostgresServer(directory, port, process)
        if _wait_ready(server):
            return server
        server.process.kill()
        server.process.wait()
    text = (directory / "postgres.log").read_text(errors="replace")
    shutil.rmtree(directory, ignore_errors=True)
    pytest.fail(f"postgres did not start:\n{text[-3000:]}", pytrace=False)


def _wait_ready(server: PostgresServer) -> bool:
    import psycopg

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            psycopg.connect(server._conninfo("postgres")).close()
        except psycopg.OperationalError:
            time.sleep(0.05)
            continue
        return True
    return False
