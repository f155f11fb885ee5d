"""Large tool results kept out of the model's context: the store and ``read_tool_result``.

A tool result over ``ContextPolicy.max_tool_result_bytes`` is saved as a record of
kind ``tool_result`` (key: an unguessable id; scope: the session) in the agent's
:class:`~deputy_shiny.persistence.store.Store`: the ``Agent(store=...)``, or with an
``offload_dir`` the :class:`~deputy_shiny.persistence.file_store.FileStore` on that
folder (one storage path; results the directory code saved there as ``<id>.json``
files are still read). The model sees a ``deputy://tool-result/<id>`` reference and a
preview. Resolving a reference accepts only the well-formed id shape (never a path) and
only a result saved for this agent's session; the store authenticates every record, so
another process serving the conversation reads it back. Results restored from a saved
session without a store are kept in memory.
The store's calls run on its own loop (:mod:`deputy_shiny.persistence.store_bridge`):
offloading and reading back happen in worker threads, never on the event loop.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..context import TOOL_RESULT_SCHEME, parse_tool_result_reference
from ..errors import (
    PersistenceCorruptError,
    PersistenceError,
    ToolInvocationError,
    ToolResultReferenceError,
)
from ..messages import ContentToolResult
from ..persistence.file_store import file_store_at
from ..persistence.files import read_document
from ..persistence.store import Store
from ..persistence.store_bridge import bridge_for, scope_for
from ..tools import Tool, tool, tool_annotations
from ..tools._tool import builtin_source

__all__ = ["PREVIEW_CHARS", "ToolResultStore", "tool_read_tool_result"]

PREVIEW_CHARS = 2_000
"""How much of an offloaded result the model sees in place of it."""

PAGE_CHARS = 16_000
"""The most characters one ``read_tool_result`` call returns."""

_KIND = "tool_result"


class ToolResultStore:
    """An agent's offloaded tool results: written under ``directory``, read back by id.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from deputy_shiny.messages import ContentToolResult
        >>> store = ToolResultStore(Path(tempfile.mkdtemp()), "session_1")
        >>> big = ContentToolResult(call_id="c1", name="dump", output="x" * 5000)
        >>> shown = store.offload(big, limit=1000)
        >>> shown.output.startswith("[Tool result too large")
        True
        >>> store.resolve(shown.output) == "x" * 5000
        True
    """

    def __init__(
        self, directory: Path | None, session_id: str, *, store: Store | None = None
    ) -> None:
        # A directory is a shorthand for the FileStore on it; results the directory code
        # saved there as files (before one storage path) are still read.
        self.directory = directory
        self.session_id = session_id
        self.store = file_store_at(directory) if store is None and directory is not None else store
        self.ids: list[str] = []  # the results this agent saved or restored, in order
        self._memory: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------ offloading

    def offload(self, result: ContentToolResult, limit: int | None) -> ContentToolResult:
        """The result the model sees: as is when small, else a reference and a preview
        (or, without a directory, the result cut to ``limit`` bytes)."""
        output = result.output
        if limit is None or result.is_error or len(output) <= limit // 4:
            return result
        size = len(output.encode("utf-8"))
        if size <= limit:
            return result
        if self.store is None:
            return result.model_copy(update={"output": _cut(output, limit, size)})
        result_id = secrets.token_urlsafe(24)
        record = {
            "id": result_id,
            "session_id": self.session_id,
            "tool_name": result.name,
            "call_id": result.call_id,
            "output": output,
            "created": time.time(),
        }
        try:
            self._write(record)
        except PersistenceError as exc:
            note = f"\n[... cut: the full result could not be saved ({exc})]"
            return result.model_copy(update={"output": _cut(output, limit, size) + note})
        self.ids.append(result_id)
        preview = output[:PREVIEW_CHARS]
        shown = (
            f"[Tool result too large for the context ({size:,} bytes); saved as "
            f"{TOOL_RESULT_SCHEME}{result_id}. The first {len(preview):,} of "
            f"{len(output):,} characters:]\n{preview}\n[... call read_tool_result with this "
            f"reference and offset={len(preview)} to read on.]"
        )
        return result.model_copy(update={"output": shown})

    @property
    def keeps(self) -> bool:
        """True when results are saved (in a directory or a store), not only in memory."""
        return self.store is not None

    def _write(self, record: Mapping[str, Any]) -> None:
        store = self.store
        assert store is not None
        bridge_for(store).call_sync(
            store.put, _KIND, record["id"], record, scope=scope_for(self.session_id)
        )

    # ------------------------------------------------------------ reading back

    def resolve(self, reference: str) -> str:
        """The full output saved under ``reference`` (or text containing one).

        Raises:
            ToolResultReferenceError: malformed, unknown, damaged, or another session's.
        """
        return str(self._record(parse_tool_result_reference(reference))["output"])

    def _record(self, result_id: str) -> dict[str, Any]:
        found = self._memory.get(result_id)
        if found is not None:
            return found
        if not self.keeps:
            raise ToolResultReferenceError(
                f"Unknown tool result {TOOL_RESULT_SCHEME}{result_id}: this agent has no "
                "offload_dir."
            )
        try:
            record = self._read(result_id)
        except PersistenceCorruptError as exc:
            raise ToolResultReferenceError(f"The saved tool result is damaged: {exc}") from None
        except PersistenceError:
            raise ToolResultReferenceError(
                f"Unknown tool result {TOOL_RESULT_SCHEME}{result_id}."
            ) from None
        if (
            record.get("id") != result_id
            or record.get("session_id") != self.session_id
            or not isinstance(record.get("output"), str)
        ):
            raise ToolResultReferenceError(
                f"Unknown tool result {TOOL_RESULT_SCHEME}{result_id} (not this session's)."
            )
        return record

    def _read(self, result_id: str) -> dict[str, Any]:
        store = self.store
        assert store is not None
        found = bridge_for(store).call_sync(store.get, _KIND, result_id)
        if found is None and self.directory is not None:
            legacy = self.directory / f"{result_id}.json"
            if legacy.exists():  # saved as a file by the directory code
                return read_document(legacy, _KIND)
        if found is None:
            raise PersistenceError(f"no tool result {result_id}")
        if found.scope != scope_for(self.session_id):
            raise ToolResultReferenceError(
                f"Unknown tool result {TOOL_RESULT_SCHEME}{result_id} (not this session's)."
            )
        return found.payload

    def read_page(self, reference: str, offset: int = 0, size: int = PAGE_CHARS) -> str:
        """Characters ``offset`` to ``offset + size`` of a saved result, with a header."""
        output = self.resolve(reference)
        offset = max(0, offset)
        end = min(len(output), offset + size)
        if offset >= len(output):
            return f"[Offset {offset:,} is past the end: the result has {len(output):,} chars.]"
        more = f" Next offset: {end}." if end < len(output) else " End of the result."
        return f"[Characters {offset:,}-{end:,} of {len(output):,}.{more}]\n{output[offset:end]}"

    # ------------------------------------------------------------ sessions

    def export(self) -> dict[str, dict[str, Any]]:
        """Every result this agent holds, by id (for a saved session).

        Raises:
            ToolResultReferenceError: a saved result is missing or damaged.
        """
        out: dict[str, dict[str, Any]] = {}
        for result_id in dict.fromkeys([*self.ids, *self._memory]):
            record = self._record(result_id)
            out[result_id] = {
                "tool_name": str(record.get("tool_name", "")),
                "call_id": str(record.get("call_id", "")),
                "output": record["output"],
            }
        return out

    def prepare_import(self, records: Mapping[str, Mapping[str, Any]]) -> Callable[[], None]:
        """Save restored results under this session (files now, the in-memory view at
        commit); returns the commit."""
        prepared: dict[str, dict[str, Any]] = {}
        for result_id, item in records.items():
            record = {
                "id": result_id,
                "session_id": self.session_id,
                "tool_name": item["tool_name"],
                "call_id": item["call_id"],
                "output": item["output"],
                "created": time.time(),
            }
            if self.keeps:
                self._write(record)
            prepared[result_id] = record

        def commit() -> None:
            for result_id, record in prepared.items():
                if not self.keeps:
                    self._memory[result_id] = record
                if result_id not in self.ids:
                    self.ids.append(result_id)

        return commit


def _cut(output: str, limit: int, size: int) -> str:
    head = output.encode("utf-8")[: max(0, limit - 200)].decode("utf-8", "ignore")
    return (
        f"{head}\n[... {size - len(head.encode('utf-8')):,} more bytes of this result cut: "
        "set ContextPolicy(offload_dir=...) to keep large results readable.]"
    )


def tool_read_tool_result(store: ToolResultStore) -> Tool:
    """The ``read_tool_result`` tool over one agent's store (read-only, closed-world)."""

    def read_tool_result(reference: str, offset: int = 0) -> str:
        """Read a large tool result that was saved outside the context, page by page.

        Args:
            reference: The deputy://tool-result/... reference from the placeholder.
            offset: The character to start at (the placeholder and each page say where
                to continue).
        """
        try:
            return store.read_page(reference, offset)
        except ToolResultReferenceError as exc:
            raise ToolInvocationError(str(exc)) from None

    return tool(
        read_tool_result,
        annotations=tool_annotations(
            read_only_hint=True,
            destructive_hint=False,
            open_world_hint=False,
            idempotent_hint=True,
        ),
        source=builtin_source("read"),
    )
