"""The reply both first_token.py apps stream: the same text, chunking and delay.

No imports beyond the standard library, so the minimal app stays free of the kit.
"""

from __future__ import annotations

CHUNKS = 60
CHUNK_SIZE = 7
CHUNK_DELAY = 0.02  # seconds between chunks (none before the first), as ScriptedReply does
FIRST_CHUNK = "w00000"


def reply_text(n: int = CHUNKS) -> str:
    """``n`` chunks of ``CHUNK_SIZE`` characters, all different (litellm refuses repeats)."""
    return "".join(f"w{i:05d} " for i in range(n))


def chunks(text: str | None = None) -> list[str]:
    """``text`` (default: :func:`reply_text`) cut into ``CHUNK_SIZE`` pieces."""
    body = reply_text() if text is None else text
    return [body[i : i + CHUNK_SIZE] for i in range(0, len(body), CHUNK_SIZE)]
