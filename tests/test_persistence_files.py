"""The one file format of everything saved: atomic, versioned, checksummed JSON that is
read back as untrusted input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deputy_shiny.errors import PersistenceCorruptError, PersistenceError
from deputy_shiny.persistence import read_document, write_document


def test_a_round_trip_keeps_the_payload(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    payload = {"turns": [{"role": "user", "text": "héllo"}], "n": 3, "none": None}
    write_document(path, "session", payload)
    assert read_document(path, "session") == payload
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # may hold a conversation
    assert json.loads(path.read_text())["deputy_shiny"] == "session"


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda text: text[: len(text) // 2], "truncated or damaged"),
        (lambda text: text.replace('"n": 3', '"n": 4'), "is not authentic"),
        (lambda text: text.replace('"session"', '"approval"', 1), "not a deputy_shiny session"),
        (lambda text: text.replace('"version": 1', '"version": 9'), "has version 9"),
        (lambda text: text.replace('"version": 1', '"version": true'), "has version True"),
        (lambda text: "[" * 10_000 + "]" * 10_000, "truncated or damaged"),
        (lambda text: "", "truncated or damaged"),
    ],
)
def test_damaged_files_are_typed_errors(tmp_path: Path, damage: object, says: str) -> None:
    path = tmp_path / "doc.json"
    write_document(path, "session", {"n": 3})
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    with pytest.raises(PersistenceCorruptError, match=says):
        read_document(path, "session")


def test_binary_symlinks_fifos_and_huge_files_are_refused(tmp_path: Path) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PersistenceCorruptError, match="not a readable JSON"):
        read_document(binary, "session")
    real = tmp_path / "real.json"
    write_document(real, "session", {"n": 1})
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(PersistenceCorruptError, match="symlink"):
        read_document(link, "session")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(PersistenceCorruptError, match="not a regular file"):
        read_document(fifo, "session")  # and does not wait for a writer
    with pytest.raises(PersistenceCorruptError, match="over the 10-byte limit"):
        read_document(real, "session", max_bytes=10)
    with pytest.raises(PersistenceError, match="does not exist"):
        read_document(tmp_path / "missing.json", "session")


def test_writes_refuse_symlinks_non_json_and_missing_directories(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(elsewhere)
    with pytest.raises(PersistenceError, match="symlink"):
        write_document(link, "session", {"n": 1})
    assert elsewhere.read_text() == "keep"
    with pytest.raises(PersistenceError, match="not plain JSON"):
        write_document(tmp_path / "x.json", "session", {"value": object()})
    with pytest.raises(PersistenceError, match="not plain JSON"):
        write_document(tmp_path / "x.json", "session", {"value": float("nan")})
    with pytest.raises(PersistenceError, match="does not exist"):
        write_document(tmp_path / "no" / "x.json", "session", {})
    with pytest.raises(PersistenceError, match="already exists"):
        write_document(elsewhere, "session", {}, overwrite=False)


def test_a_crash_mid_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "doc.json"
    write_document(path, "session", {"n": 1})

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(PersistenceError, match="No space left"):
        write_document(path, "session", {"n": 2})
    monkeypatch.undo()
    assert read_document(path, "session") == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]  # no temp file left
