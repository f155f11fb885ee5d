"""``deputy feedback export``: the kit's stored ratings as an evaluation dataset.

``deputy feedback export [--store URL | --root DIR] [--format jsonl|pydantic-evals]
[--output FILE] [--user NAME]... [--rating up|down] [--chat ID]`` reads the ratings
(:mod:`deputy_shiny.feedback`) from the app's store (``--store``, a SQLAlchemy URL,
default ``DEPUTY_STORE_URL``) or from the files of a ``KitPersistence`` root kept
without a store (``--root``, default ``DEPUTY_CONVERSATIONS_DIR``), with the server's
record key (``DEPUTY_RECORD_KEY``, else the per-user key file, as the app reads it), and
writes them to ``--output`` (default: standard output). ``--user`` keeps only those
users' ratings (a signed-in name or a pseudonym; repeat it for several). Secrets are
masked as in the logs. A bad flag is status 2; a store that cannot be read, 1.

Examples:
    >>> import contextlib, io, tempfile
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     status = main(["export", "--root", tempfile.mkdtemp(), "--format", "jsonl"])
    >>> status, out.getvalue()
    (0, '')
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ..errors import DeputyError
from ..feedback.export import FORMATS, ExportFormat, export_feedback
from ..persistence.store import Store

__all__ = ["main", "open_feedback_store"]

STORE_ENV = "DEPUTY_STORE_URL"
ROOT_ENV = "DEPUTY_CONVERSATIONS_DIR"
FILES_UNDER_ROOT = Path("records") / ".store"
"""Where a ``KitPersistence`` without a store keeps its ratings, under its root."""


class _Usage(Exception):
    """A mistake on the command line (status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="deputy feedback", description="Export the chat's ratings.")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write the ratings as a dataset")
    where = export.add_mutually_exclusive_group()
    where.add_argument("--store", help=f"the app's store URL (default ${STORE_ENV})")
    where.add_argument("--root", help=f"the KitPersistence root without a store (${ROOT_ENV})")
    export.add_argument("--format", choices=FORMATS, default="jsonl")
    export.add_argument("--output", help="the file to write (default: standard output)")
    export.add_argument("--user", action="append", help="only this user's ratings")
    export.add_argument("--rating", choices=("up", "down"))
    export.add_argument("--chat", help="only the ratings of this chat module's id")
    return parser


def open_feedback_store(store: str | None, root: str | None) -> Store:
    """The store the ratings are in: ``store`` (a URL), else ``root``'s files, else
    the environment's (``DEPUTY_STORE_URL``, then ``DEPUTY_CONVERSATIONS_DIR``).

    Raises:
        _Usage: neither is given nor set.
    """
    if store is None and root is None:
        store = os.environ.get(STORE_ENV) or None
        root = None if store else os.environ.get(ROOT_ENV) or None
    if store is not None:
        from ..persistence.sql_store import SqlStore

        return SqlStore(store, auto_migrate=False)
    if root is None:
        raise _Usage(f"name the store: --store URL or --root DIR (or set ${STORE_ENV})")
    from ..persistence.file_store import FileStore

    return FileStore(Path(root).expanduser() / FILES_UNDER_ROOT)


async def _export(options: argparse.Namespace) -> str:
    store = open_feedback_store(options.store, options.root)
    format: ExportFormat = options.format
    async with store:
        return await export_feedback(
            store, format, users=options.user, rating=options.rating, chat=options.chat
        )


def main(argv: Sequence[str]) -> int:
    """``deputy feedback ...`` with ``argv`` (after ``feedback``); the exit status."""
    try:
        options = _parser().parse_args(list(argv))
        text = asyncio.run(_export(options))
    except _Usage as exc:
        print(f"deputy feedback: {exc}", file=sys.stderr)
        return 2
    except DeputyError as exc:
        print(f"deputy feedback: {exc}", file=sys.stderr)
        return 1
    if options.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(options.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"deputy feedback: {options.output}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
