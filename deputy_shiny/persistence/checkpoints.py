"""File checkpoints: a journal of the files ``write_file``, ``edit_file`` and ``multi_edit``
changed, so :meth:`FileJournal.rewind` can put them back.

Before one of those tools changes a file, the tool calls :meth:`FileJournal.record`,
which stores the file's previous contents (or notes that it did not exist, so a rewind
deletes it). A checkpoint marks a point to go back to: the engine makes one at the
start of every run, and :meth:`FileJournal.checkpoint` makes one on demand. Nothing
else is journaled: ``run_python``, ``run_bash`` and MCP tools change files (or remote
services) the journal never sees.

The journal lives in a :class:`~deputy_shiny.persistence.store.Store` when the agent has
one (records of kinds ``file_checkpoint_index`` and ``file_checkpoint_blob`` under the
session's scope, the same two documents as below, authenticated by the store), else in
one directory (a private temporary one unless the agent is given ``checkpoint_dir``), in
the one persisted format (:mod:`deputy_shiny.persistence.files`):

* ``index.json`` (kind ``file_checkpoint_index``): the checkpoints, oldest first, and the
  changes, in order, each naming its file relative to the working directory;
* ``blobs/<sha256>.json`` (kind ``file_checkpoint_blob``): one stored file content,
  base64 (binary-safe), named by the SHA-256 of its bytes; equal contents are stored once.

Everything read back is untrusted: the index's authentication (an HMAC with the
server's record key), every path (relative, no ``..``, no absolute path, inside the
working directory, never through a symlink) and every blob's hash are checked before
anything is written; files are read and restored beneath a descriptor of the working
directory with no symlink followed at any component (:mod:`deputy_shiny._util.safe_fs`), so a
directory swapped for a link during a rewind is refused, never followed; a problem is a
:class:`~deputy_shiny.errors.CheckpointCorruptError` or
:class:`~deputy_shiny.errors.CheckpointPathError` and nothing is restored. Caps refuse
a change before it happens (:class:`~deputy_shiny.errors.CheckpointLimitError`).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> work = Path(tempfile.mkdtemp())
    >>> journal = FileJournal(work)
    >>> first = journal.checkpoint("before")
    >>> journal.record(work / "notes.txt")          # about to create notes.txt
    >>> _ = (work / "notes.txt").write_text("draft")
    >>> [c.changes for c in journal.list_checkpoints()]
    [1]
    >>> journal.rewind(first.id).restored_changes, (work / "notes.txt").exists()
    (1, False)
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .._util import safe_fs
from ..errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointLimitError,
    CheckpointPathError,
    PathDenied,
    PersistenceError,
)
from .files import canonical_json, read_document, write_document
from .store import Store, check_name
from .store_bridge import bridge_for

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_JOURNAL_BYTES",
    "USER_TURN_KEY",
    "FileCheckpoint",
    "FileJournal",
    "FileRewind",
]

DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024
"""The largest file whose previous contents a checkpoint records (50 MiB)."""
DEFAULT_MAX_JOURNAL_BYTES = 250 * 1024 * 1024
"""The most bytes of file contents the journal stores in all (250 MiB)."""

USER_TURN_KEY = "user_turn"
"""The metadata key of a run's checkpoint naming its prompt's turn (an index into the
conversation's turns): editing that message rewinds the files to this checkpoint."""

STATE_FORMAT = "deputy_shiny.file_checkpoints"
"""The ``format`` of :meth:`FileJournal.checkpoint_state`'s dict."""

_INDEX = "index.json"
_INDEX_KIND = "file_checkpoint_index"
_BLOB_KIND = "file_checkpoint_blob"
_ID = re.compile(r"^ckpt_[0-9a-f]{32}$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
_MAX_NAME = 200
_MAX_PATH = 4096
_MAX_METADATA_BYTES = 64 * 1024
_STORE_PREFIX = "store:"  # ``directory`` of a journal in a store: a name, never a path


class FileCheckpoint(BaseModel):
    """One checkpoint, as :meth:`FileJournal.list_checkpoints` reports it.

    Attributes:
        id: Pass it to ``rewind_files``.
        name: The optional label.
        metadata: JSON values stored with it.
        created_at: When it was made (seconds since the epoch).
        run_id: The run that made it (None for one made by ``checkpoint()``).
        changes: The file changes recorded after it and before the next checkpoint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    run_id: str | None = None
    changes: int = 0


class FileRewind(BaseModel):
    """What :meth:`FileJournal.rewind` did.

    Attributes:
        checkpoint: The checkpoint the files went back to (now the latest).
        restored_changes: How many recorded file changes were undone.
        paths: The files restored or deleted, relative to the working directory.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    checkpoint: FileCheckpoint
    restored_changes: int
    paths: tuple[str, ...] = ()


class FileJournal:
    """The file checkpoint journal of one agent (thread-safe: tools run in threads).

    Args:
        working_dir: The only directory whose files are journaled and restored.
        directory: Where the journal lives. None: a private temporary directory,
            removed when the journal is garbage collected. An existing journal in
            ``directory`` is picked up (after checking it).
        max_file_bytes: The largest previous contents recorded; a bigger file refuses
            the change.
        max_journal_bytes: The most stored contents in all; a change that would pass it
            is refused.
        key: The key authenticating the journal's files (None: the server's record key,
            :func:`~deputy_shiny.persistence.keys.record_key`).
        store: Keep the journal in this store instead of a directory (``directory``
            must then be None). Its calls run on the store's own loop
            (:mod:`deputy_shiny.persistence.store_bridge`): call the journal from a
            worker thread, as the engine and the file tools do.
        scope: The store's scope for the journal (a session's), with ``store``.
    """

    def __init__(
        self,
        working_dir: str | os.PathLike[str],
        *,
        directory: str | os.PathLike[str] | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_journal_bytes: int = DEFAULT_MAX_JOURNAL_BYTES,
        key: bytes | str | None = None,
        store: Store | None = None,
        scope: str | None = None,
    ) -> None:
        for name, value in (
            ("file_checkpoint_max_file_bytes", max_file_bytes),
            ("file_checkpoint_max_journal_bytes", max_journal_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise CheckpointError(f"{name} must be a whole number of bytes, not {value!r}")
        self.working_dir = Path(os.path.realpath(working_dir))
        self._key = key
        self.max_file_bytes = max_file_bytes
        self.max_journal_bytes = max_journal_bytes
        self._lock = threading.RLock()
        self._store = store
        self._scope = scope or ""
        self._finalizer: weakref.finalize[Any, Any] | None = None
        if store is not None:
            if directory is not None or scope is None:
                raise CheckpointError("a journal in a store takes a scope and no checkpoint_dir")
            check_name(scope, "scope")
            self.directory = Path(f"{_STORE_PREFIX}{scope}")
            self._load()  # an existing journal must be sound before it is used
            return
        if directory is None:
            made = Path(tempfile.mkdtemp(prefix="deputy-checkpoints-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, made, ignore_errors=True)
            self.directory = made
        else:
            self.directory = Path(os.path.realpath(directory))
            if not self.directory.is_dir():
                raise CheckpointError(f"checkpoint_dir {str(directory)!r} is not a directory")
            if _inside(self.directory, self.working_dir):
                raise CheckpointError(
                    "checkpoint_dir must be outside the working directory (the model's tools "
                    "could otherwise edit the journal)"
                )
        (self.directory / "blobs").mkdir(mode=0o700, exist_ok=True)
        if (self.directory / _INDEX).exists() or (self.directory / _INDEX).is_symlink():
            self._load()  # an existing journal must be sound before it is used

    # ------------------------------------------------------------------ public

    def checkpoint(
        self,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
    ) -> FileCheckpoint:
        """Make a checkpoint (the point :meth:`rewind` goes back to) and return it."""
        if name is not None and (not isinstance(name, str) or len(name) > _MAX_NAME):
            raise CheckpointError(f"name must be a string of at most {_MAX_NAME} characters")
        meta = dict(metadata or {})
        try:
            size = len(canonical_json(meta))
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"metadata must hold JSON values only ({exc})") from None
        if size > _MAX_METADATA_BYTES:
            raise CheckpointError(f"metadata is {size:,} bytes; at most {_MAX_METADATA_BYTES:,}")
        record = {
            "id": f"ckpt_{uuid.uuid4().hex}",
            "name": name,
            "metadata": meta,
            "created_at": time.time(),
            "run_id": run_id,
        }
        with self._lock:
            index = self._load()
            index["checkpoints"].append(record)
            self._save(index)
        return FileCheckpoint(**record)

    def list_checkpoints(self) -> list[FileCheckpoint]:
        """Every checkpoint, oldest first, with the number of changes recorded after each."""
        with self._lock:
            index = self._load()
        counts: dict[str, int] = {}
        for change in index["changes"]:
            counts[change["checkpoint"]] = counts.get(change["checkpoint"], 0) + 1
        return [FileCheckpoint(**c, changes=counts.get(c["id"], 0)) for c in index["checkpoints"]]

    def record(self, path: str | os.PathLike[str]) -> None:
        """Journal ``path``'s current contents before a tool changes it.

        ``path`` is the resolved path the tool is about to write. An absent file is
        recorded as absent (a rewind deletes it).

        Raises:
            CheckpointPathError: it is outside the working directory, a symlink or not a
                regular file.
            CheckpointLimitError: its contents, or the journal with them, would pass a cap.
            CheckpointCorruptError: the journal on disk is damaged or was edited.
        """
        relative = self._relative(Path(path))
        with self._lock:
            index = self._load()
            if not index["checkpoints"]:
                index["checkpoints"].append(_initial_checkpoint())
            current = index["checkpoints"][-1]["id"]
            if any(c["path"] == relative and c["checkpoint"] == current for c in index["changes"]):
                # Only the contents at the checkpoint matter: a repeat is counted, not stored.
                index["changes"].append({"checkpoint": current, "path": relative, "repeat": True})
                self._save(index)
                return
            data = self._read_current(relative)
            change: dict[str, Any] = {"checkpoint": current, "path": relative, "blob": None}
            if data is not None:
                digest = hashlib.sha256(data).hexdigest()
                stored = _stored_blobs(index)
                if digest not in stored:
                    total = sum(stored.values())
                    if total + len(data) > self.max_journal_bytes:
                        raise CheckpointLimitError(
                            f"Checkpointing {relative} would take the checkpoint journal to "
                            f"{total + len(data):,} bytes, over its "
                            f"{self.max_journal_bytes:,}-byte limit "
                            "(file_checkpoint_max_journal_bytes)."
                        )
                    self._write_blob(digest, data)
                change.update(blob=digest, size=len(data))
            index["changes"].append(change)
            self._save(index)

    def rewind(self, checkpoint_id: str) -> FileRewind:
        """Put every file changed since ``checkpoint_id`` back as it was then.

        Files created since are deleted; later checkpoints are discarded. Every path and
        stored content is checked before the first file is touched.

        Raises:
            CheckpointError: no such checkpoint.
            CheckpointPathError: a file to restore is now a symlink or a directory, or its
                directory leads outside the working directory.
            CheckpointCorruptError: the journal is damaged or was edited.
        """
        with self._lock:
            index = self._load()
            ids = [c["id"] for c in index["checkpoints"]]
            if not isinstance(checkpoint_id, str) or checkpoint_id not in ids:
                raise CheckpointError(
                    f"No checkpoint {checkpoint_id!r}; list_checkpoints() shows the ones kept."
                )
            position = ids.index(checkpoint_id)
            since = set(ids[position:])
            undone = [c for c in index["changes"] if c["checkpoint"] in since]
            targets: dict[str, str | None] = {}
            for change in undone:
                if not change.get("repeat") and change["path"] not in targets:
                    targets[change["path"]] = change["blob"]
            plan = [
                (self._target(rel, restoring=sha is not None), self._blob(sha))
                for rel, sha in targets.items()
            ]
            for rel, data in plan:
                self._apply(rel, data)
            index["checkpoints"] = index["checkpoints"][: position + 1]
            index["changes"] = [c for c in index["changes"] if c["checkpoint"] not in since]
            self._save(index)
            self._collect_garbage(index)
            kept = index["checkpoints"][position]
        return FileRewind(
            checkpoint=FileCheckpoint(**kept),
            restored_changes=len(undone),
            paths=tuple(sorted(targets)),
        )

    def changed_since(self, checkpoint_id: str) -> tuple[str, ...]:
        """The files :meth:`rewind` to ``checkpoint_id`` would restore or delete (sorted),
        without touching them: what a confirmation lists before the rewind.

        Raises:
            CheckpointError: no such checkpoint.
        """
        with self._lock:
            index = self._load()
        ids = [c["id"] for c in index["checkpoints"]]
        if not isinstance(checkpoint_id, str) or checkpoint_id not in ids:
            raise CheckpointError(f"No checkpoint {checkpoint_id!r}.")
        since = set(ids[ids.index(checkpoint_id) :])
        return tuple(sorted({c["path"] for c in index["changes"] if c["checkpoint"] in since}))

    def read_files(self, paths: tuple[str, ...]) -> dict[str, bytes | None]:
        """The current contents of ``paths`` (None: absent), read as a rewind reads them
        (beneath the working directory, no symlink followed, under the file cap): a
        conversation branch keeps them to put back later with :meth:`write_files`."""
        with self._lock:
            return {rel: self._read_current(self._relative(Path(rel))) for rel in paths}

    def write_files(self, contents: Mapping[str, bytes | None]) -> None:
        """Put ``contents`` (from :meth:`read_files`; None deletes) back, every path checked
        first as a rewind checks it; the journal itself is not changed."""
        with self._lock:
            plan = [(self._relative(Path(rel)), data) for rel, data in contents.items()]
            for rel, data in plan:
                self._target(rel, restoring=data is not None)
            for rel, data in plan:
                self._apply(rel, data)

    def checkpoint_state(self) -> dict[str, Any]:
        """The whole journal as one JSON-only dict, for a saved session.

        It holds the checkpoints, the changes and every stored content (base64), so
        :meth:`restore_checkpoint_state` can rebuild the journal in a new process.

        Examples:
            >>> import tempfile
            >>> journal = FileJournal(tempfile.mkdtemp())
            >>> state = journal.checkpoint_state()
            >>> state["format"], state["checkpoints"]
            ('deputy_shiny.file_checkpoints', [])
        """
        with self._lock:
            index = self._load()
            blobs = {
                sha: base64.b64encode(self._blob(sha) or b"").decode("ascii")
                for sha in _stored_blobs(index)
            }
        return {
            "format": STATE_FORMAT,
            "version": 1,
            "working_dir": str(self.working_dir),
            "checkpoints": index["checkpoints"],
            "changes": index["changes"],
            "blobs": blobs,
        }

    def restore_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Replace the journal with one :meth:`checkpoint_state` returned (untrusted input).

        Everything is checked first (format, working directory, paths, hashes, caps);
        on any problem the journal stays exactly as it was.

        Raises:
            CheckpointCorruptError: the state is not sound, or it belongs to another
                working directory.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise CheckpointCorruptError("This is not a deputy_shiny file checkpoint state.")
        if state.get("version") != 1:
            raise CheckpointCorruptError(
                f"File checkpoint state version {state.get('version')!r} is not supported."
            )
        if state.get("working_dir") != str(self.working_dir):
            raise CheckpointCorruptError(
                f"The checkpoint state belongs to working directory {state.get('working_dir')!r}, "
                f"not {str(self.working_dir)!r}."
            )
        index = self._validate(
            {
                "working_dir": state.get("working_dir"),
                "checkpoints": state.get("checkpoints"),
                "changes": state.get("changes"),
            },
            "the checkpoint state",
        )
        raw_blobs = state.get("blobs")
        if not isinstance(raw_blobs, Mapping):
            raise CheckpointCorruptError("The checkpoint state has no blobs object.")
        needed = _stored_blobs(index)
        blobs: dict[str, bytes] = {}
        for sha, size in needed.items():
            encoded = raw_blobs.get(sha)
            if not isinstance(encoded, str):
                raise CheckpointCorruptError(f"The checkpoint state lacks stored content {sha}.")
            try:
                data = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise CheckpointCorruptError(f"Stored content {sha} is not base64.") from None
            if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
                raise CheckpointCorruptError(f"Stored content {sha} does not match its hash.")
            blobs[sha] = data
        total = sum(needed.values())
        if total > self.max_journal_bytes:
            raise CheckpointLimitError(
                f"The checkpoint state holds {total:,} bytes, over the journal's "
                f"{self.max_journal_bytes:,}-byte limit."
            )
        with self._lock:
            for sha, data in blobs.items():
                self._write_blob(sha, data)
            self._save(index)
            self._collect_garbage(index)

    def close(self) -> None:
        """Remove the journal's private temporary directory (not a given ``checkpoint_dir``)."""
        if self._finalizer is not None:
            self._finalizer()

    # ------------------------------------------------------------------ index

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        assert self._store is not None
        try:
            return bridge_for(self._store).call_sync(fn, *args, **kwargs)
        except CheckpointError:
            raise
        except PersistenceError as exc:
            raise CheckpointCorruptError(f"The checkpoint journal cannot be used: {exc}") from None

    def _load(self) -> dict[str, Any]:
        if self._store is not None:
            found = self._call(self._store.get, _INDEX_KIND, self._scope)
            if found is None:
                return {"working_dir": str(self.working_dir), "checkpoints": [], "changes": []}
            return self._validate(found.payload, f"{self._store!r} {_INDEX_KIND} {self._scope}")
        path = self.directory / _INDEX
        if not os.path.lexists(path):
            return {"working_dir": str(self.working_dir), "checkpoints": [], "changes": []}
        try:
            payload = read_document(path, _INDEX_KIND, key=self._key)
        except PersistenceError as exc:
            raise CheckpointCorruptError(f"The checkpoint journal cannot be used: {exc}") from None
        return self._validate(payload, str(path))

    def _save(self, index: dict[str, Any]) -> None:
        if self._store is not None:
            self._store_write(_INDEX_KIND, self._scope, index)
            return
        try:
            write_document(self.directory / _INDEX, _INDEX_KIND, index, key=self._key)
        except PersistenceError as exc:
            raise CheckpointError(f"The checkpoint journal cannot be written: {exc}") from None

    def _validate(self, payload: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Check an index (from disk or a saved state) field by field; return a clean copy."""

        def bad(problem: str) -> CheckpointCorruptError:
            return CheckpointCorruptError(f"{where}: {problem}; nothing is restored from it.")

        if payload.get("working_dir") != str(self.working_dir):
            raise bad("it belongs to another working directory")
        checkpoints, changes = payload.get("checkpoints"), payload.get("changes")
        if not isinstance(checkpoints, list) or not isinstance(changes, list):
            raise bad("it has no checkpoint or change list")
        clean_checkpoints: list[dict[str, Any]] = []
        seen: set[str] = set()
        for entry in checkpoints:
            if not isinstance(entry, dict) or set(entry) != {
                "id",
                "name",
                "metadata",
                "created_at",
                "run_id",
            }:
                raise bad("a checkpoint entry has unexpected fields")
            cid, name, meta, created, run_id = (
                entry["id"],
                entry["name"],
                entry["metadata"],
                entry["created_at"],
                entry["run_id"],
            )
            if not isinstance(cid, str) or not _ID.match(cid) or cid in seen:
                raise bad(f"checkpoint id {cid!r} is not valid or repeats")
            if name is not None and not isinstance(name, str):
                raise bad("a checkpoint name is not a string")
            if not isinstance(meta, dict):
                raise bad("checkpoint metadata is not an object")
            if isinstance(created, bool) or not isinstance(created, int | float):
                raise bad("a checkpoint time is not a number")
            if run_id is not None and not isinstance(run_id, str):
                raise bad("a checkpoint run id is not a string")
            seen.add(cid)
            clean_checkpoints.append(dict(entry))
        order = {c["id"]: i for i, c in enumerate(clean_checkpoints)}
        clean_changes: list[dict[str, Any]] = []
        last = 0
        for change in changes:
            if not isinstance(change, dict):
                raise bad("a change entry is not an object")
            owner = change.get("checkpoint")
            if owner not in order or order[owner] < last:
                raise bad("a change names an unknown checkpoint or is out of order")
            last = order[owner]
            relative = _check_relative(change.get("path"), bad)
            if change.get("repeat") is True and set(change) == {"checkpoint", "path", "repeat"}:
                clean_changes.append({"checkpoint": owner, "path": relative, "repeat": True})
                continue
            blob = change.get("blob")
            if blob is None and set(change) == {"checkpoint", "path", "blob"}:
                clean_changes.append({"checkpoint": owner, "path": relative, "blob": None})
                continue
            size = change.get("size")
            if (
                set(change) != {"checkpoint", "path", "blob", "size"}
                or not isinstance(blob, str)
                or not _SHA.match(blob)
                or isinstance(size, bool)
                or not isinstance(size, int)
                or not 0 <= size <= self.max_file_bytes
            ):
                raise bad(f"the change to {relative} is malformed")
            clean_changes.append(
                {"checkpoint": owner, "path": relative, "blob": blob, "size": size}
            )
        return {
            "working_dir": str(self.working_dir),
            "checkpoints": clean_checkpoints,
            "changes": clean_changes,
        }

    # ------------------------------------------------------------------ blobs

    def _store_write(self, kind: str, key: str, payload: Mapping[str, Any]) -> None:
        assert self._store is not None
        try:
            bridge_for(self._store).call_sync(
                self._store.put, kind, key, payload, scope=self._scope
            )
        except PersistenceError as exc:
            raise CheckpointError(f"The checkpoint journal cannot be written: {exc}") from None

    def _blob_key(self, sha: str) -> str:
        """A blob's record key: one per scope and content (a digest keeps it short)."""
        return "blob-" + hashlib.sha256(f"{self._scope}\n{sha}".encode()).hexdigest()

    def _blob_path(self, sha: str) -> Path:
        return self.directory / "blobs" / f"{sha}.json"

    def _write_blob(self, sha: str, data: bytes) -> None:
        payload = {"sha256": sha, "size": len(data), "base64": base64.b64encode(data).decode()}
        if self._store is not None:
            self._store_write(_BLOB_KIND, self._blob_key(sha), payload)
            return
        try:
            write_document(self._blob_path(sha), _BLOB_KIND, payload, key=self._key)
        except PersistenceError as exc:
            raise CheckpointError(f"The checkpoint journal cannot be written: {exc}") from None

    def _blob(self, sha: str | None) -> bytes | None:
        """A stored content, its hash checked (None: the file did not exist)."""
        if sha is None:
            return None
        limit = (self.max_file_bytes * 4) // 3 + 64 * 1024
        try:
            if self._store is not None:
                found = bridge_for(self._store).call_sync(
                    self._store.get, _BLOB_KIND, self._blob_key(sha)
                )
                if found is None or found.payload.get("sha256") != sha:
                    raise PersistenceError("it is missing")
                payload = found.payload
            else:
                payload = read_document(
                    self._blob_path(sha), _BLOB_KIND, max_bytes=limit, key=self._key
                )
            data = base64.b64decode(payload.get("base64", ""), validate=True)
        except (PersistenceError, binascii.Error, ValueError, TypeError) as exc:
            raise CheckpointCorruptError(
                f"The stored content {sha} of the checkpoint journal cannot be used ({exc})."
            ) from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise CheckpointCorruptError(f"The stored content {sha} does not match its hash.")
        return data

    def _collect_garbage(self, index: Mapping[str, Any]) -> None:
        if self._store is not None:
            store = self._store
            wanted = {self._blob_key(sha) for sha in _stored_blobs(index)}

            async def collect() -> None:
                for record in await store.list_records(_BLOB_KIND, scope=self._scope):
                    if record.key not in wanted:
                        await store.delete(_BLOB_KIND, record.key)

            with contextlib.suppress(PersistenceError):
                bridge_for(store).call_sync(collect)
            return
        keep = {f"{sha}.json" for sha in _stored_blobs(index)}
        for entry in os.scandir(self.directory / "blobs"):
            if entry.name not in keep and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)

    # ------------------------------------------------------------------ files

    def _relative(self, path: Path) -> str:
        """``path`` relative to the working directory, refusing anything else."""
        lexical = Path(os.path.normpath(path if path.is_absolute() else self.working_dir / path))
        if not _inside(lexical, self.working_dir) or lexical == self.working_dir:
            raise CheckpointPathError(
                f"{path} is outside the working directory; file checkpointing covers only "
                f"{self.working_dir}."
            )
        try:
            through_link = Path(os.path.realpath(lexical.parent)) != lexical.parent
        except OSError:  # a component flipping between link and directory
            through_link = True
        if through_link:
            raise CheckpointPathError(f"{path} goes through a symbolic link; it is not journaled.")
        return lexical.relative_to(self.working_dir).as_posix()

    def _lstat(self, relative: str) -> os.stat_result | None:
        """``relative``'s own status beneath the working directory, by descriptor."""
        try:
            return safe_fs.lstat(self.working_dir, relative)
        except PathDenied:
            raise CheckpointPathError(
                f"{relative}: its directory now goes through a symbolic link; not restored."
            ) from None
        except OSError as exc:
            raise CheckpointPathError(
                f"{relative} cannot be checked ({exc.strerror or exc}); not restored."
            ) from None

    def _target(self, relative: str, *, restoring: bool = False) -> str:
        """Check ``relative`` as it is now, refusing a symlink, a directory or a way
        outside (and, when its contents are to be written back, a file where a directory
        was). Checked beneath a descriptor of the working directory, no symlink followed;
        the writes that follow go the same way, so a swap after this check is refused
        then, never followed."""
        if restoring:
            parents = relative.split("/")[:-1]
            for depth in range(len(parents), 0, -1):
                ancestor = "/".join(parents[:depth])
                found = self._lstat(ancestor)
                if found is None:
                    continue
                if stat.S_ISLNK(found.st_mode):
                    raise CheckpointPathError(
                        f"{relative}: its directory now goes through a symbolic link; not restored."
                    )
                if not stat.S_ISDIR(found.st_mode):
                    raise CheckpointPathError(
                        f"{relative}: {ancestor} is no longer a directory; not restored."
                    )
                break
        info = self._lstat(relative)
        if info is None:
            return relative
        if stat.S_ISLNK(info.st_mode):
            raise CheckpointPathError(f"{relative} is now a symbolic link; not restored.")
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointPathError(f"{relative} is no longer a regular file; not restored.")
        return relative

    def _read_current(self, relative: str) -> bytes | None:
        self._target(relative)
        try:
            fd, info = safe_fs.open_regular(self.working_dir, relative)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PathDenied:
            raise CheckpointPathError(
                f"{relative} goes through a symbolic link; it is not journaled."
            ) from None
        except OSError as exc:
            raise CheckpointPathError(f"{relative} cannot be read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as fh:
            if info.st_size > self.max_file_bytes:
                raise CheckpointLimitError(
                    f"{relative} is {info.st_size:,} bytes, over the "
                    f"{self.max_file_bytes:,}-byte limit of what a checkpoint records "
                    "(file_checkpoint_max_file_bytes)."
                )
            data = fh.read(self.max_file_bytes + 1)
        if len(data) > self.max_file_bytes:
            raise CheckpointLimitError(f"{relative} grew past the checkpoint file limit.")
        return data

    def _apply(self, relative: str, data: bytes | None) -> None:
        """Restore (or delete) one file, beneath a descriptor of the working directory
        with no symlink followed at any component."""
        self._target(relative, restoring=data is not None)  # checked again
        root = self.working_dir
        try:
            if data is None:
                safe_fs.unlink(root, relative)
                return
            safe_fs.make_dirs(root, relative.rpartition("/")[0], mode=0o777)
            safe_fs.replace_file(root, relative, data, mode=None)
        except PathDenied:
            raise CheckpointPathError(
                f"{relative}: its path became a symbolic link; not restored."
            ) from None
        except (IsADirectoryError, NotADirectoryError):
            raise CheckpointPathError(
                f"{relative}: its path is no longer a directory and a file as it was; not restored."
            ) from None
        except OSError as exc:
            doing = "deleted" if data is None else "restored"
            raise CheckpointError(
                f"{relative} cannot be {doing} ({exc.strerror or exc})."
            ) from None


# ---------------------------------------------------------------------- helpers


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _initial_checkpoint() -> dict[str, Any]:
    return {
        "id": f"ckpt_{uuid.uuid4().hex}",
        "name": "initial",
        "metadata": {},
        "created_at": time.time(),
        "run_id": None,
    }


def _stored_blobs(index: Mapping[str, Any]) -> dict[str, int]:
    """The stored contents the changes refer to, with their sizes."""
    return {c["blob"]: c["size"] for c in index["changes"] if not c.get("repeat") and c.get("blob")}


def _check_relative(value: Any, bad: Any) -> str:
    """A journal path: relative POSIX, inside the working directory, nothing odd."""
    if not isinstance(value, str) or not value or len(value) > _MAX_PATH:
        raise bad("a change has no valid path")
    if any(ord(ch) < 32 for ch in value) or "\\" in value:
        raise bad(f"path {value!r} holds control characters or backslashes")
    pure = PurePosixPath(value)
    if pure.is_absolute() or value.startswith("~") or re.match(r"^[A-Za-z]:", value):
        raise bad(f"path {value!r} is absolute; journal paths are relative to the working dir")
    if any(part in ("..", ".", "") for part in value.split("/")):
        raise bad(f"path {value!r} is not a plain relative path (it uses '..' or '.')")
    return value
