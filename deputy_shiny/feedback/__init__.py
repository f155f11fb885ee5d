"""Users' ratings of assistant replies, and their export as an evaluation set.

The kit (``agent_chat_ui(id, feedback=True)``) stores each thumbs up or down, with its
comment and what made the reply, as a :class:`FeedbackRecord` in its store;
:func:`export_feedback` (and ``deputy feedback export``) turns them into JSON lines or a
dataset that ``pydantic_evals.Dataset`` loads as it is. ``records.py`` is the record and
its store; ``export.py`` the formats and the redaction.

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> asyncio.run(export_feedback(store, "jsonl"))
    ''
"""

from __future__ import annotations

from .export import (
    FORMATS,
    ExportFormat,
    export_feedback,
    feedback_dataset,
    feedback_jsonl,
    redacted_record,
)
from .records import (
    FEEDBACK_KIND,
    FEEDBACK_SCOPE,
    MAX_COMMENT_CHARS,
    FeedbackRecord,
    Rating,
    load_feedback,
    save_feedback,
)

__all__ = [
    "FEEDBACK_KIND",
    "FEEDBACK_SCOPE",
    "FORMATS",
    "MAX_COMMENT_CHARS",
    "ExportFormat",
    "FeedbackRecord",
    "Rating",
    "export_feedback",
    "feedback_dataset",
    "feedback_jsonl",
    "load_feedback",
    "redacted_record",
    "save_feedback",
]
