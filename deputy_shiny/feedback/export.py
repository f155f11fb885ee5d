"""Ratings as a dataset an evaluation tool reads as it is: JSON lines, or pydantic-evals.

:func:`export_feedback` reads the ratings of a store (only those of the ``users`` the
caller names, when it names any) and writes them in one of two formats:

- ``"jsonl"``: one :class:`~deputy_shiny.feedback.records.FeedbackRecord` per line;
- ``"pydantic-evals"``: a JSON document that ``pydantic_evals.Dataset.from_file`` (or
  ``from_text(..., fmt="json")``) loads as it is. Each rating is a case: its
  ``inputs`` are ``{"prompt": ..., "history": [...]}`` (the user message, and the turns
  before it, as ``Turn.model_dump`` writes them, so a task can ``set_turns`` them), a
  thumbs-up's reply is the ``expected_output`` (a thumbs-down has none: its reply is
  ``metadata["rated_reply"]``), and ``metadata`` holds the rating, the comment, the run,
  the model, the tools, usage and cost.

Secrets are masked as the logs mask them
(:func:`~deputy_shiny._util.redact.redact_values` for credential-like keys and the
process's own keys, :func:`~deputy_shiny._util.redact.redact` for key-like text), in
every string of every record.

Examples:
    >>> import asyncio, json, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> from deputy_shiny.feedback import FeedbackRecord, save_feedback
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> _ = asyncio.run(save_feedback(store, FeedbackRecord(feedback_id="r1", rating="up",
    ...     user_id="user-1", chat="chat", prompt="2+2?", reply="4 (key sk-abcdefgh1234)")))
    >>> dataset = json.loads(asyncio.run(export_feedback(store, "pydantic-evals")))
    >>> dataset["cases"][0]["inputs"]["prompt"], dataset["cases"][0]["expected_output"]
    ('2+2?', '4 (key sk-abcd…)')
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any, Literal

from .._util.redact import redact, redact_values
from ..errors import ConfigurationError
from ..persistence.store import Store
from .records import FeedbackRecord, Rating, load_feedback

__all__ = [
    "FORMATS",
    "ExportFormat",
    "export_feedback",
    "feedback_dataset",
    "feedback_jsonl",
    "redacted_record",
]

ExportFormat = Literal["jsonl", "pydantic-evals"]
FORMATS: tuple[ExportFormat, ...] = ("jsonl", "pydantic-evals")


def _redact_text(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_text(v) for v in value]
    return value


def _masked(value: Any) -> Any:
    return _redact_text(redact_values(value))


def redacted_record(record: FeedbackRecord) -> FeedbackRecord:
    """``record`` with secrets masked as the logs mask them, in what people and models
    wrote (the comment, the prompt, the reply and each turn's contents, on its own so a
    tool call's arguments keep their depth); ids, counts and costs are left as they are
    (``input_tokens`` names a count, not a credential).

    Examples:
        >>> record = FeedbackRecord(feedback_id="r1", rating="down", user_id="u",
        ...     chat="chat", comment="my key is sk-live-0123456789")
        >>> redacted_record(record).comment
        'my key is sk-live…'
    """
    text = _masked({"comment": record.comment, "prompt": record.prompt, "reply": record.reply})
    turns = []
    for turn in record.turns:
        clean = dict(turn)
        clean["contents"] = _masked(turn.get("contents", []))
        turns.append(clean)
    return record.model_copy(update={**text, "turns": turns})


def feedback_jsonl(records: Iterable[FeedbackRecord]) -> str:
    """One redacted record per line (JSON), each line ending in a newline.

    Examples:
        >>> feedback_jsonl([])
        ''
    """
    lines = [redacted_record(r).model_dump_json() + "\n" for r in records]
    return "".join(lines)


def _history(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns before the user message the reply answers (the last user turn with
    text: tool results come back in user turns without any)."""
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        texts = [c for c in turn.get("contents", ()) if c.get("type") == "text" and c.get("text")]
        if turn.get("role") == "user" and texts:
            return turns[:index]
    return []


def _case(record: FeedbackRecord) -> dict[str, Any]:
    history = _history(record.turns)
    metadata = {
        "rating": record.rating,
        "comment": record.comment,
        "rated_reply": record.reply,
        "feedback_id": record.feedback_id,
        "user_id": record.user_id,
        "chat": record.chat,
        "run_id": record.run_id,
        "model": record.model,
        "tools": record.tools,
        "usage": record.usage,
        "cost": record.cost,
        "truncated_turns": record.truncated_turns,
        "rated_at": record.rated_at,
    }
    return {
        "name": f"{record.rating}-{record.feedback_id}",
        "inputs": {"prompt": record.prompt, "history": history},
        "metadata": metadata,
        "expected_output": record.reply if record.rating == "up" else None,
    }


def feedback_dataset(
    records: Iterable[FeedbackRecord], name: str = "deputy-feedback"
) -> dict[str, Any]:
    """The redacted ratings as a pydantic-evals dataset document (``name``, ``cases``).

    Examples:
        >>> feedback_dataset([])
        {'name': 'deputy-feedback', 'cases': []}
    """
    return {"name": name, "cases": [_case(redacted_record(r)) for r in records]}


async def export_feedback(
    store: Store,
    format: ExportFormat = "jsonl",
    *,
    users: Collection[str] | None = None,
    rating: Rating | None = None,
    chat: str | None = None,
) -> str:
    """The ratings in ``store`` as text in ``format`` (``"jsonl"`` or
    ``"pydantic-evals"``), secrets masked: only ``users``' (pseudonyms or signed-in
    names) when given, only one ``rating`` or ``chat`` when given.

    Raises:
        ConfigurationError: an unknown format.
        PersistenceNotAuthenticError: a rating was written without the server's key.
    """
    if format not in FORMATS:
        raise ConfigurationError(f"Unknown feedback format {format!r}: use one of {FORMATS}")
    records = await load_feedback(store, users=users, rating=rating, chat=chat)
    if format == "jsonl":
        return feedback_jsonl(records)
    return json.dumps(feedback_dataset(records), ensure_ascii=False, indent=2) + "\n"
