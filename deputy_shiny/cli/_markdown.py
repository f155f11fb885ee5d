"""The model's replies as Markdown in the terminal, rendered a block at a time.

A reply streams in as chunks; Markdown can only be laid out once a block is whole (a
``**`` may close in the next chunk). :class:`MarkdownStream` keeps the text of the block
being written and renders each finished block (the text up to a blank line outside a
fenced code block) as soon as it is finished, the rest when the reply ends. The
terminal scrolls as usual: nothing is redrawn, so the output reads the same in a
scrollback, a ``tmux`` pane or a recording.

What a model writes stays inert: terminal escape sequences are removed from each block,
whole, *before* rich sees it (:func:`~deputy_shiny.cli._safe.terminal_safe`; an escape
split over two chunks goes whole, its parameters too), rich markup in the
text is not interpreted (Markdown renders text as text), and links are never
terminal hyperlinks: ``[label](url)`` shows as ``label (url)``, so a person sees where
a link goes and no click takes them somewhere else.

Examples:
    >>> import io
    >>> from rich.console import Console
    >>> out = io.StringIO()
    >>> stream = MarkdownStream(Console(file=out, width=40, color_system=None))
    >>> for chunk in ("# Ti", "tle\\n\\nSome **bo", "ld** [x](http://a.example)"):
    ...     stream.feed(chunk)
    >>> "Title" in out.getvalue(), "Some" in out.getvalue()  # the heading's block is done
    (True, False)
    >>> stream.flush()
    >>> print(out.getvalue().split("\\n", 2)[2].rstrip())
    Some bold x (http://a.example)
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.markdown import Markdown
from rich.segment import Segment, Segments

from ._safe import terminal_safe

__all__ = ["MarkdownStream", "split_finished"]

# A fence opens or closes a code block: up to 3 spaces, then ``` or ~~~ (CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def split_finished(text: str) -> tuple[str, str]:
    """``text`` cut after its last blank line outside a fenced code block: the finished
    blocks, and the block still being written.

    Examples:
        >>> split_finished("a\\n\\nb")
        ('a\\n\\n', 'b')
        >>> split_finished("```\\ncode\\n\\nmore")  # inside a fence: nothing is finished
        ('', '```\\ncode\\n\\nmore')
        >>> split_finished("```\\ncode\\n```\\n\\nnext")
        ('```\\ncode\\n```\\n\\n', 'next')
    """
    fence: str | None = None
    cut = 0
    at = 0
    lines = text.split("\n")
    for index, line in enumerate(lines[:-1]):  # the last piece has no newline yet
        at += len(line) + 1
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None and not line.strip() and index > 0:
            cut = at
    return text[:cut], text[cut:]


class MarkdownStream:
    """Renders streamed Markdown on ``console``, each block once it is finished.

    The text given to :meth:`feed` is untrusted: each block is made terminal-safe
    before it is rendered.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._pending = ""
        self._rendered = False  # a block of this reply is on screen: the next one is apart

    @property
    def pending(self) -> bool:
        """True while text waits for its block to finish."""
        return bool(self._pending.strip())

    def feed(self, text: str) -> None:
        """Take a chunk; render the blocks it finishes."""
        done, self._pending = split_finished(self._pending + text)
        self._render(done)

    def flush(self) -> None:
        """Render what is left (the reply ended, or something else is about to print)."""
        rest, self._pending = self._pending, ""
        self._render(rest)
        self._rendered = False

    def _render(self, text: str) -> None:
        text = terminal_safe(text).strip("\n")
        if not text.strip():
            return
        lines = self.console.render_lines(
            Markdown(text, hyperlinks=False), pad=False, new_lines=True
        )
        while lines and _blank(lines[0]):  # rich starts a list with an empty line
            lines.pop(0)
        if self._rendered:
            self.console.print()  # rich puts a blank line between the blocks of one render
        self.console.print(Segments([s for line in lines for s in line]), end="")
        self.console.file.flush()
        self._rendered = True


def _blank(line: list[Segment]) -> bool:
    """True for a line that shows nothing (a code block's shaded margin shows)."""
    return all(not s.text.strip() and not (s.style and s.style.bgcolor) for s in line)
