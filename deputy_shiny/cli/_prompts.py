"""Questions in the terminal: the agent's approvals and ``ask_user``, answered by typing.

Input is read by a :class:`LineReader` on the event loop (no thread blocked in
``input()``), so an interrupt can cancel a question that is waiting: Ctrl-C during an
approval stops the run, and the next question reads the next line, not one an
abandoned reader swallowed.

An approval shows the call (tool, reason, arguments, as text) and takes ``y`` (run
it), ``a`` (run it, and this tool from now on), ``n`` (deny it) or ``s`` (deny it and
stop the run). The person approves only what they saw: runs of blanks show as a counted
marker and odd blanks by their code (so padding hides nothing), and a call longer than
:data:`APPROVAL_ARGUMENT_CHARS` shows its start, then takes ``v`` to show the rest:
``y`` and ``a`` are refused until it has been shown whole. ``ask_user`` shows each
question with numbered options plus "Other": a number (several, comma-separated, when
it is multi-select) picks options, anything else is the free-text answer. End of input
denies, or declines the questions.

Examples:
    >>> import asyncio, io
    >>> from rich.console import Console
    >>> from deputy_shiny.approvals import ApprovalRequest
    >>> async def main():
    ...     prompts = TerminalPrompts(Console(file=io.StringIO()), ScriptedLines(["a"]))
    ...     request = ApprovalRequest(call_id="c", tool_name="write_file",
    ...                               arguments={"path": "x"}, reason="writes ask")
    ...     return await prompts.approve(request)
    >>> asyncio.run(main()).always
    True
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TextIO

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from ..approvals import ApprovalDecision, ApprovalRequest
from ..errors import AskUserDeclined
from ..tools.interactive import Answer, AskUserContext, Question
from ._printer import safe_text, visible_blanks

__all__ = [
    "LineReader",
    "Lines",
    "ScriptedLines",
    "TerminalPrompts",
    "TextLines",
    "stdin_lines",
]

_CHOICES = {
    "y": "approve",
    "yes": "approve",
    "a": "always",
    "always": "always",
    "n": "deny",
    "no": "deny",
    "s": "stop",
    "stop": "stop",
    "v": "view",
    "view": "view",
}
_ATTEMPTS = 3
APPROVAL_ARGUMENT_CHARS = 4000
"""Characters of a call's arguments an approval shows at first. A longer call shows the
rest only when asked (``v``), and cannot be approved before it has been seen whole."""


class Lines(Protocol):
    """Where typed lines come from: ``await readline()`` is a line, or None at end of input.

    ``echoes`` is True when the terminal shows what was typed (a tty); otherwise the
    prompt prints the line itself, so a transcript reads the same.
    """

    echoes: bool

    async def readline(self) -> str | None:
        """The next line without its newline, or None when input has ended."""
        ...


class LineReader:
    """Lines of a file descriptor (standard input), read on the event loop.

    The descriptor is watched only while a line is awaited, so what a person types
    during a run waits in the terminal until it is asked for. A cancelled wait loses
    nothing. Where the loop cannot watch the descriptor (a regular file), it reads in
    a worker thread instead: such a read never blocks for long.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.echoes = os.isatty(fd)
        self._buffer = b""
        self._lines: deque[str] = deque()
        self._eof = False

    async def readline(self) -> str | None:
        """The next line (without its newline), or None at end of input."""
        while not self._lines:
            if self._eof:
                return None
            self._take(await self._read())
        return self._lines.popleft()

    def _take(self, data: bytes) -> None:
        if not data:
            self._eof = True
            if self._buffer:  # a last line without its newline still counts
                self._lines.append(self._buffer.decode("utf-8", "replace"))
                self._buffer = b""
            return
        *complete, self._buffer = (self._buffer + data).split(b"\n")
        self._lines.extend(line.decode("utf-8", "replace").rstrip("\r") for line in complete)

    async def _read(self) -> bytes:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(self._fd, _wake, ready)
        except (PermissionError, NotImplementedError, ValueError):  # not pollable
            return await asyncio.to_thread(os.read, self._fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
        try:
            return os.read(self._fd, 65536)
        except BlockingIOError:  # woken for nothing: read again later
            return await self._read()


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class ScriptedLines:
    """Lines given in advance (for tests and scripts); None once they run out.

    Examples:
        >>> import asyncio
        >>> lines = ScriptedLines(["y"])
        >>> asyncio.run(lines.readline()), asyncio.run(lines.readline())
        ('y', None)
    """

    echoes = False

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = deque(lines)

    async def readline(self) -> str | None:
        """The next scripted line, or None when there is none left."""
        return self._lines.popleft() if self._lines else None


class TextLines:
    """Lines of a text stream with no file descriptor (a replaced ``sys.stdin``), read in
    a worker thread.

    Examples:
        >>> import asyncio, io
        >>> asyncio.run(TextLines(io.StringIO("yes\\n")).readline())
        'yes'
    """

    echoes = False

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    async def readline(self) -> str | None:
        """The next line (without its newline), or None at end of input."""
        line = await asyncio.to_thread(self._stream.readline)
        return line.rstrip("\r\n") if line else None


def stdin_lines() -> Lines:
    """Where the terminal's answers come from: standard input's descriptor, if it has one."""
    if sys.stdin is None:  # no standard input at all: every question meets its end
        return ScriptedLines([])
    try:
        return LineReader(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):  # replaced or closed (io.UnsupportedOperation)
        return TextLines(sys.stdin)


class TerminalPrompts:
    """The agent's ``approval_handler`` and ``ask_user`` callback, on one terminal."""

    def __init__(self, console: Console, lines: Lines) -> None:
        self.console = console
        self.lines = lines

    async def ask(self, prompt: str) -> str | None:
        """Show ``prompt`` (trusted text) and read one line; None at end of input."""
        self.console.print(Text(prompt, style="bold"), end="")
        self.console.file.flush()
        line = await self.lines.readline()
        if line is None or not self.lines.echoes:
            # Show what was read where the terminal did not (end of input: a new line).
            self.console.print(safe_text(line or ""))
        return line

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask whether ``request``'s call may run (the agent's ``approval_handler``)."""
        shown = visible_blanks(json.dumps(request.arguments, ensure_ascii=False, default=str))
        rest = shown[APPROVAL_ARGUMENT_CHARS:] if len(shown) > APPROVAL_ARGUMENT_CHARS else None
        body = Text()
        if request.reason:
            body.append_text(safe_text(request.reason, "italic"))
            body.append("\n")
        body.append_text(shown[:APPROVAL_ARGUMENT_CHARS])
        if rest is not None:
            body.append(f"\n[cut: {len(rest):,} more characters; type v to see them]", "bold red")
        waiting = f" (+{request.calls_after} more waiting)" if request.calls_after else ""
        self._call_panel(body, f"Approve {request.tool_name}?{waiting}")
        attempts = 0
        while attempts < _ATTEMPTS:
            if rest is None:
                question = "Run it? [y]es, [a]lways, [n]o, [s]top the run: "
            else:
                question = "The call is cut: [v]iew the rest, [n]o, [s]top the run: "
            answer = await self.ask(question)
            if answer is None:
                return ApprovalDecision.deny("no one answered (end of input)")
            choice = _CHOICES.get(answer.strip().lower())
            if choice == "view" and rest is not None:
                self._call_panel(rest, f"The rest of the {request.tool_name} call")
                rest = None
                continue
            if choice in ("approve", "always") and rest is not None:
                attempts += 1
                self.console.print(
                    Text("Not yet: see the whole call first (type v).", style="yellow")
                )
                continue
            if choice == "approve":
                return ApprovalDecision.approve()
            if choice == "always":
                return ApprovalDecision.approve_always()
            if choice == "deny":
                return ApprovalDecision.deny("the user said no")
            if choice == "stop":
                return ApprovalDecision.stop_run("the user stopped the run")
            attempts += 1
            letters = "v, n or s" if rest is not None else "y, a, n or s"
            self.console.print(Text(f"Type {letters}.", style="yellow"))
        return ApprovalDecision.deny("no valid answer")

    def _call_panel(self, body: Text, title: str) -> None:
        self.console.print(
            Panel(
                body,
                title=safe_text(title, "bold yellow"),
                title_align="left",
                border_style="yellow",
                expand=False,
            )
        )

    async def ask_user(self, questions: list[Question], context: AskUserContext) -> list[Answer]:
        """Ask the model's questions in turn (the ``ask_user`` tool's callback)."""
        return [await self._question(q) for q in questions]

    async def _question(self, question: Question) -> Answer:
        text = Text()
        for index, option in enumerate(question.options, 1):
            text.append(f"{index}. ", style="bold")
            text.append_text(safe_text(option.label))
            text.append(" - ")
            text.append_text(safe_text(option.description, "dim"))
            text.append("\n")
        other = len(question.options) + 1
        text.append(f"{other}. ", style="bold")
        text.append("Other (type your own answer)")
        title = safe_text(f"[{question.header}] {question.question}", "bold magenta")
        self.console.print(
            Panel(text, title=title, title_align="left", border_style="magenta", expand=False)
        )
        hint = "numbers, comma-separated" if question.multi_select else "a number"
        for _ in range(_ATTEMPTS):
            reply = await self.ask(f"Your choice ({hint}, or type an answer): ")
            if reply is None:
                raise AskUserDeclined("input ended")
            answer = _answer(question, reply.strip(), other)
            if isinstance(answer, _Retry):
                self.console.print(Text(answer.message, style="yellow"))
                continue
            if isinstance(answer, _Other):
                reply = await self.ask("Your answer: ")
                if reply is None:
                    raise AskUserDeclined("input ended")
                return reply.strip()
            return answer
        raise AskUserDeclined("no valid answer in the terminal")


@dataclass(frozen=True)
class _Retry:
    """A reply that answers nothing, and what to tell the user."""

    message: str


class _Other:
    """The "Other" option: the answer is typed next."""


_OTHER = _Other()


def _answer(question: Question, reply: str, other: int) -> Answer | _Retry | _Other:
    """``reply`` as an answer: the chosen labels, or free text; or "Other", or a retry."""
    parts = [p.strip() for p in reply.split(",") if p.strip()]
    if not parts:
        return _Retry("Choose an option or type an answer.")
    if not all(p.isdigit() for p in parts):
        return reply
    numbers = [int(p) for p in parts]
    if numbers == [other]:
        return _OTHER
    if not all(1 <= n <= len(question.options) for n in numbers):
        return _Retry(f"Choose numbers from 1 to {other}.")
    if len(numbers) > 1 and not question.multi_select:
        return _Retry("Choose one number.")
    return [question.options[n - 1].label for n in dict.fromkeys(numbers)]
