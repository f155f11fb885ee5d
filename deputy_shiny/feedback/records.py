"""A rating of one assistant reply, as the kit stores it: :class:`FeedbackRecord`.

One record per rated reply (a second rating of the same reply replaces the first), of
kind :data:`FEEDBACK_KIND` in a :class:`~deputy_shiny.persistence.Store`, keyed by the
reply's id. Every record is in the one scope :data:`FEEDBACK_SCOPE`, which the kit's
TTL sweep keeps: ratings are an evaluation set, not a conversation, and outlive the
conversation they rate. Like every store record, each carries an HMAC under the
server's record key: a record written by anyone without the key is refused on read.

The user is a pseudonym (:attr:`FeedbackRecord.user_id`, a hash the kit makes), with the
signed-in name beside it only for a user the kit trusts by name (Posit Connect's, a
trusted header's, the app's own key); an anonymous visitor's browser token never
reaches a record.

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
    >>> record = FeedbackRecord(feedback_id="r1", rating="down", comment="Wrong file",
    ...     user_id="user-1", chat="chat", prompt="Summarize a.md", reply="It is empty.")
    >>> _ = asyncio.run(save_feedback(store, record))
    >>> [r.comment for r in asyncio.run(load_feedback(store, rating="down"))]
    ['Wrong file']
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..persistence.store import Store, StoredRecord, check_name

__all__ = [
    "FEEDBACK_KIND",
    "FEEDBACK_SCOPE",
    "MAX_COMMENT_CHARS",
    "FeedbackRecord",
    "Rating",
    "load_feedback",
    "save_feedback",
]

FEEDBACK_KIND = "kit-feedback"
"""The store record kind of a rating."""
FEEDBACK_SCOPE = "kit-feedback"
"""The scope every rating is in (the kit's TTL sweep keeps it)."""
MAX_COMMENT_CHARS = 2000
"""The longest comment a rating may carry; a longer one is refused, never cut."""

Rating = Literal["up", "down"]


class FeedbackRecord(BaseModel):
    """One user's rating of one assistant reply, with what made that reply.

    Attributes:
        feedback_id: The reply's id (the kit's, random per reply): the record's key.
        rating: ``"up"`` or ``"down"``.
        comment: The user's optional comment (plain text, at most
            :data:`MAX_COMMENT_CHARS` characters).
        user_id: The user as a pseudonym (stable per user, no identity in it).
        user: The signed-in user's name when the kit trusts it by name, else None.
        chat: The chat module's id (which chat of the app).
        run_id: The run that made the reply (the last, when an approval resumed it).
        model: The model that answered (the last request's).
        tools: The tools the reply called, in order (repeats kept).
        usage: ``requests``, ``input_tokens``, ``output_tokens``, ``cached_tokens`` of
            the reply's requests.
        cost: Their cost in USD, None when any request's cost is unknown.
        prompt: The user message the reply answers.
        reply: The reply's text.
        turns: The conversation up to and including the reply, each turn as
            ``Turn.model_dump(mode="json")`` writes it (no system prompt).
        truncated_turns: How many of the oldest turns were left out of ``turns`` (a
            long conversation is kept to its newest turns).
        rated_at: When the rating was given (Unix seconds).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    feedback_id: str
    rating: Rating
    comment: str = Field(default="", max_length=MAX_COMMENT_CHARS)
    user_id: str
    user: str | None = None
    chat: str
    run_id: str | None = None
    model: str | None = None
    tools: list[str] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    cost: float | None = None
    prompt: str = ""
    reply: str = ""
    turns: list[dict[str, Any]] = Field(default_factory=list)
    truncated_turns: int = 0
    rated_at: float = Field(default_factory=time.time)


async def save_feedback(store: Store, record: FeedbackRecord) -> StoredRecord:
    """Store ``record`` (replacing an earlier rating of the same reply).

    Raises:
        ConfigurationError: the reply id is not a valid store key.
    """
    check_name(record.feedback_id, "feedback id")
    payload = record.model_dump(mode="json")
    return await store.put(FEEDBACK_KIND, record.feedback_id, payload, scope=FEEDBACK_SCOPE)


async def load_feedback(
    store: Store,
    *,
    users: Collection[str] | None = None,
    rating: Rating | None = None,
    chat: str | None = None,
) -> list[FeedbackRecord]:
    """The ratings in ``store``, oldest first: only those of ``users`` (pseudonyms or
    signed-in names) when given, of one ``rating``, of one ``chat``.

    Raises:
        PersistenceNotAuthenticError: a rating was written without the server's key.
    """
    wanted = None if users is None else frozenset(users)
    found = []
    for stored in await store.list_records(FEEDBACK_KIND, scope=FEEDBACK_SCOPE):
        record = FeedbackRecord.model_validate(stored.payload)
        if wanted is not None and not ({record.user_id, record.user} & wanted):
            continue
        if rating is not None and record.rating != rating:
            continue
        if chat is not None and record.chat != chat:
            continue
        found.append(record)
    return sorted(found, key=lambda r: (r.rated_at, r.feedback_id))
