"""Walking an exception's chain: the errors behind the one that was raised.

Examples:
    >>> try:
    ...     try:
    ...         raise OSError("refused")
    ...     except OSError as inner:
    ...         raise RuntimeError("could not connect") from inner
    ... except RuntimeError as exc:
    ...     [type(e).__name__ for e in causes(exc)]
    ['OSError']
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["causes"]


def causes(exc: BaseException, *, suppressed: bool = False) -> Iterator[BaseException]:
    """The chain behind ``exc`` (carried originals, ``__cause__``, ``__context__``).

    A carried ``original_exception`` (litellm's wrappers) comes first, then the
    ``__cause__``, then the ``__context__`` unless ``raise ... from None`` suppressed it.
    ``suppressed=True`` follows a suppressed context too: httpcore re-raises its
    connection errors ``from None``, hiding the OS error (refused, DNS) behind them.
    """
    seen = {id(exc)}
    current: BaseException | None = exc
    while current is not None:
        inner = getattr(current, "original_exception", None)
        if isinstance(inner, BaseException):
            nxt: BaseException | None = inner
        elif current.__cause__ is not None:
            nxt = current.__cause__
        elif suppressed or not current.__suppress_context__:
            nxt = current.__context__
        else:
            nxt = None
        if nxt is None or id(nxt) in seen:
            return
        seen.add(id(nxt))
        yield nxt
        current = nxt
