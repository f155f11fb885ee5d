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
    blocks = _Blocks()
    blocks.add(text)
    return blocks.take(), blocks.text


class _Blocks:
    """Streamed text, and where its finished blocks end.

    Each line is looked at once, when its newline arrives: a long reply (a file in a
    code block) costs time in proportion to its length, not to its length squared.
    """

    def __init__(self) -> None:
        self.text = ""
        self._scanned = 0  # the text before this is made of lines already looked at
        self._fence: str | None = None  # the fence of the code block the text is in
        self._cut = 0  # the finished blocks end here

    def add(self, chunk: str) -> None:
        """Append ``chunk``; note the blocks its complete lines finish."""
        self.text += chunk
        while (end := self.text.find("\n", self._scanned)) >= 0:
            line = self.text[self._scanned : end]
            self._scanned = end + 1
            opened = _FENCE.match(line)
            if self._fence is None and opened:
                self._fence = opened.group(1)[0] * 3
            elif self._fence is not None and line.strip().startswith(self._fence):
                self._fence = None
            elif self._fence is None and not line.strip():
                self._cut = self._scanned

    def take(self) -> str:
        """The finished blocks, taken out of the text."""
        done, self.text = self.text[: self._cut], self.text[self._cut :]
        self._scanned -= self._cut
        self._cut = 0
        return done

    def take_all(self) -> str:
        """All the text, finished or not; the next text starts a new reply."""
        rest, self.text = self.text, ""
        self._scanned = self._cut = 0
        self._fence = None
        return rest


class MarkdownStream:
    """Renders streamed Markdown on ``console``, each block once it is finished.

    The text given to :meth:`feed` is untrusted: each block is made terminal-safe
    before it is rendered.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._blocks = _Blocks()
        self._rendered = False  # a block of this reply is on screen: the next one is apart

    @property
    def pending(self) -> bool:
        """True while text waits for its block to finish."""
        return bool(self._blocks.text.strip())

    def feed(self, text: str) -> None:
        """Take a chunk; render the blocks it finishes."""
        self._blocks.add(text)
        self._render(self._blocks.take())

    def flush(self) -> None:
        """Render what is left (the reply ended, or something else is about to print)."""
        self._render(self._blocks.take_all())
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
