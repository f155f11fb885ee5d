"""Small text helpers shared across the library: counts with nouns, cut-down strings.

Examples:
    >>> plural(1, "file"), plural(3, "match", "matches"), plural(1234, "row", thousands=True)
    ('1 file', '3 matches', '1,234 rows')
    >>> truncate("abcdefgh", 3)
    'abc… [8 chars]'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["plural", "problems", "truncate"]


def plural(n: int, word: str, many: str | None = None, *, thousands: bool = False) -> str:
    """``n`` and ``word``, made plural (``many``, else ``word + "s"``) unless ``n`` is 1.

    ``thousands=True`` groups the digits (``1,234``).
    """
    count = f"{n:,}" if thousands else f"{n}"
    return f"{count} {word if n == 1 else (many or word + 's')}"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was when cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text)} chars]"


def problems(error: ValidationError) -> str:
    """A pydantic validation error as one line: ``where: what`` for each problem.

    Examples:
        >>> from pydantic import TypeAdapter, ValidationError
        >>> try:
        ...     TypeAdapter(list[int]).validate_python(["x"])
        ... except ValidationError as exc:
        ...     print(problems(exc))
        0: Input should be a valid integer, unable to parse string as an integer
    """
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )
