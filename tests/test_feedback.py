"""Ratings in a store and their export (deputy_shiny/feedback): on files, SQLite and
PostgreSQL; only the users asked for; secrets masked; loadable by pydantic-evals as is;
``deputy feedback export`` on the command line."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_evals import Dataset

from deputy_shiny.cli import main as deputy
from deputy_shiny.errors import ConfigurationError, PersistenceNotAuthenticError
from deputy_shiny.feedback import (
    MAX_COMMENT_CHARS,
    FeedbackRecord,
    export_feedback,
    load_feedback,
    save_feedback,
)
from deputy_shiny.messages import ContentText, ContentToolRequest, ContentToolResult, Turn
from deputy_shiny.persistence import FileStore
from deputy_shiny.persistence.sql_store import SqlStore
from deputy_shiny.persistence.store import Store

KEY = "ab" * 32
OTHER_KEY = "cd" * 32
SECRET = "sk-proj-0123456789abcdefSECRET"

TURNS = [
    Turn(role="user", contents=[ContentText(text="What is in a.md?")]),
    Turn(role="assistant", contents=[ContentText(text="Nothing yet.")]),
    Turn(role="user", contents=[ContentText(text=f"Read it with key {SECRET}")]),
    Turn(
        role="assistant",
        contents=[
            ContentToolRequest(
                id="call_1", name="read_file", arguments={"path": "a.md", "api_key": "k-9999"}
            )
        ],
    ),
    Turn(role="user", contents=[ContentToolResult(call_id="call_1", name="read_file", output="")]),
    Turn(role="assistant", contents=[ContentText(text="It is empty.")]),
]


def record(feedback_id: str, rating: str = "down", **fields: Any) -> FeedbackRecord:
    values: dict[str, Any] = {
        "feedback_id": feedback_id,
        "rating": rating,
        "comment": "",
        "user_id": "user-alice",
        "user": "alice",
        "chat": "chat",
        "run_id": "run-1",
        "model": "openai/gpt-4.1-mini",
        "tools": ["read_file"],
        "usage": {"requests": 2, "input_tokens": 30, "output_tokens": 5, "cached_tokens": 0},
        "cost": 0.02,
        "prompt": f"Read it with key {SECRET}",
        "reply": "It is empty.",
        "turns": [t.model_dump(mode="json") for t in TURNS],
        "rated_at": 1000.0,
    }
    values.update(fields)
    return FeedbackRecord.model_validate(values)


@pytest.fixture(params=["file", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store
    if request.param == "file":
        made = FileStore(tmp_path / "store", key=KEY)
    elif request.param == "sqlite":
        made = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}", key=KEY)
    else:
        made = SqlStore(request.getfixturevalue("postgres_url"), key=KEY)
    async with made:
        yield made


async def test_a_rating_round_trips_and_a_second_one_replaces_it(store: Store) -> None:
    await save_feedback(store, record("r1", comment="wrong file"))
    await save_feedback(store, record("r2", "up", user_id="user-bob", user=None, rated_at=1001.0))
    await save_feedback(store, record("r1", "up", comment="fine after all", rated_at=1002.0))
    found = await load_feedback(store)
    assert [(r.feedback_id, r.rating, r.comment) for r in found] == [
        ("r2", "up", ""),
        ("r1", "up", "fine after all"),
    ]
    assert found[1].turns == record("r1").turns and found[1].usage["input_tokens"] == 30


async def test_only_the_users_asked_for_are_read(store: Store) -> None:
    await save_feedback(store, record("r1"))
    await save_feedback(store, record("r2", user_id="user-bob", user=None))
    await save_feedback(store, record("r3", "up", chat="other"))
    by_name = await load_feedback(store, users=["alice"])
    assert [r.feedback_id for r in by_name] == ["r1", "r3"]
    by_pseudonym = await load_feedback(store, users=["user-bob"])
    assert [r.feedback_id for r in by_pseudonym] == ["r2"]
    assert await load_feedback(store, users=["mallory"]) == []
    assert [r.feedback_id for r in await load_feedback(store, rating="up")] == ["r3"]
    assert [r.feedback_id for r in await load_feedback(store, chat="other")] == ["r3"]


async def test_a_rating_written_without_the_servers_key_is_refused(tmp_path: Path) -> None:
    async with FileStore(tmp_path / "store", key=OTHER_KEY) as forger:
        await save_feedback(forger, record("forged", "up"))
    async with FileStore(tmp_path / "store", key=KEY) as store:
        with pytest.raises(PersistenceNotAuthenticError):
            await export_feedback(store, "jsonl")


def test_a_huge_comment_or_a_bad_rating_is_no_record() -> None:
    with pytest.raises(ValidationError):
        record("r1", comment="x" * (MAX_COMMENT_CHARS + 1))
    with pytest.raises(ValidationError):
        record("r1", rating="meh")


async def test_a_reply_id_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    async with FileStore(tmp_path / "store", key=KEY) as store:
        with pytest.raises(ConfigurationError):
            await save_feedback(store, record("../../etc/passwd"))


async def test_the_export_masks_secrets_as_the_logs_do(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_SERVICE_TOKEN", "server-own-token-77")
    comment = "my password is server-own-token-77"
    await save_feedback(store, record("r1", comment=comment))
    text = await export_feedback(store, "jsonl") + await export_feedback(store, "pydantic-evals")
    assert SECRET not in text and "k-9999" not in text and "server-own-token-77" not in text
    assert "sk-proj…" in text and "<redacted>" in text
    line = json.loads((await export_feedback(store, "jsonl")).splitlines()[0])
    assert line["usage"]["input_tokens"] == 30  # a count is no credential
    assert line["turns"][3]["contents"][0]["arguments"] == {"path": "a.md", "api_key": "<redacted>"}


async def test_the_pydantic_evals_export_loads_as_a_dataset(store: Store, tmp_path: Path) -> None:
    await save_feedback(store, record("r1", comment="wrong"))
    await save_feedback(store, record("r2", "up", rated_at=1001.0))
    path = tmp_path / "feedback.json"
    path.write_text(await export_feedback(store, "pydantic-evals"))
    dataset = Dataset[dict[str, Any], str, dict[str, Any]].from_file(path)
    down, up = dataset.cases
    assert down.name == "down-r1" and down.expected_output is None
    assert down.metadata is not None and down.metadata["comment"] == "wrong"
    assert down.metadata["rated_reply"] == "It is empty."
    assert down.metadata["tools"] == ["read_file"]
    assert up.expected_output == "It is empty."
    # The prompt is the user message the reply answers; the history, the turns before it.
    assert down.inputs["prompt"].startswith("Read it with key sk-proj…")
    assert [Turn.model_validate(t).text for t in down.inputs["history"]] == [
        "What is in a.md?",
        "Nothing yet.",
    ]


async def test_an_unknown_format_is_a_clear_error(tmp_path: Path) -> None:
    async with FileStore(tmp_path / "store", key=KEY) as store:
        with pytest.raises(ConfigurationError, match="pydantic-evals"):
            await export_feedback(store, "csv")  # type: ignore[arg-type]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = deputy(["feedback", *argv])
    return status, out.getvalue(), err.getvalue()


async def test_the_command_exports_a_stores_ratings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    async with SqlStore(url, key=KEY) as store:
        await save_feedback(store, record("r1", comment="wrong"))
        await save_feedback(store, record("r2", "up", user_id="user-bob", user=None))
    monkeypatch.setenv("DEPUTY_RECORD_KEY", KEY)
    status, out, _ = await _in_thread(run_cli, "export", "--store", url, "--user", "user-bob")
    assert status == 0
    assert [json.loads(line)["feedback_id"] for line in out.splitlines()] == ["r2"]
    target = tmp_path / "out.json"
    argv = ("export", "--store", url, "--format", "pydantic-evals", "--output", str(target))
    status, out, _ = await _in_thread(run_cli, *argv)
    assert status == 0 and out == ""
    assert len(Dataset[dict[str, Any], str, dict[str, Any]].from_file(target).cases) == 2
    # The store from the environment, as the reference app reads it.
    monkeypatch.setenv("DEPUTY_STORE_URL", url)
    status, out, _ = await _in_thread(run_cli, "export", "--rating", "down")
    assert status == 0 and [json.loads(line)["comment"] for line in out.splitlines()] == ["wrong"]
    # Another server's key: the ratings are not this server's, and nothing is written.
    monkeypatch.setenv("DEPUTY_RECORD_KEY", OTHER_KEY)
    status, out, err = await _in_thread(run_cli, "export")
    assert status == 1 and out == "" and "deputy feedback:" in err


def test_the_command_says_what_is_wrong_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEPUTY_STORE_URL", raising=False)
    monkeypatch.delenv("DEPUTY_CONVERSATIONS_DIR", raising=False)
    status, _, err = run_cli("export")
    assert status == 2 and err.startswith("deputy feedback: name the store")
    status, _, err = run_cli("export", "--format", "csv", "--root", "/tmp")
    assert status == 2 and "invalid choice" in err
    status, _, err = run_cli("export", "--store", "sqlite:///x.db", "--root", "/tmp")
    assert status == 2 and "not allowed with" in err
    assert os.environ.get("DEPUTY_STORE_URL") is None


async def _in_thread(fn: Any, *args: Any) -> Any:
    """The command runs its own event loop: call it from a worker thread."""
    return await asyncio.to_thread(fn, *args)


def test_the_feedback_page_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's app and its replay recipe (pydantic-evals, offline) run as written,
    each alone, as a module of its own (pydantic's generic classes need one)."""
    page = Path(__file__).resolve().parent.parent / "docs" / "kit" / "feedback.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
    assert len(blocks) == 2 and "evaluate_sync(replay)" in blocks[1]
    for index, block in enumerate(blocks):
        module = types.ModuleType(f"feedback_docs_{index}")
        monkeypatch.setitem(sys.modules, module.__name__, module)
        exec(compile(block, str(page), "exec"), module.__dict__)
