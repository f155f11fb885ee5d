"""What a run shows in the terminal: its events, printed with rich as they come.

The model's text is Markdown: on a terminal it is rendered (headings, emphasis, lists,
code blocks) a block at a time as it streams (:mod:`~deputy_shiny.cli._markdown`,
links shown with their address, never as clickable terminal hyperlinks); when the
output is not a terminal, or with ``--no-color``, it streams as written. Each tool call
is a compact panel (its arguments), and its result another (the output the model
sees, cut to a few lines, red when it failed); denials, errors, retries, warnings, waits
for a silent provider and a stop other than ``complete`` get one line each, and the run
ends with its usage line (``turn`` and ``content`` events print nothing: the text
already streamed, and the model's reasoning is not shown). ``verbose`` shows calls and
results whole and a line per model request.

Nothing the model or a tool writes is interpreted: it is printed as a rich ``Text``
(so ``[bold]`` stays ``[bold]``, never markup), with terminal escape sequences and
other control characters removed (so no colour, cursor move, title change or
hyperlink a model wrote reaches the terminal).

Examples:
    >>> import io
    >>> from rich.console import Console
    >>> from deputy_shiny.events import TextEvent
    >>> out = io.StringIO()
    >>> printer = EventPrinter(Console(file=out, force_terminal=False, width=60))
    >>> ids = {"agent_id": "a", "session_id": "s", "run_id": "r"}
    >>> printer.handle(TextEvent(text="[bold]hi\\x1b[31m!", **ids))
    >>> out.getvalue()
    '[bold]hi!'
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from .._util.text import plural
from ..events import (
    AgentEvent,
    AgentResult,
    ApprovalEvent,
    FallbackEvent,
    PermissionEvent,
    RequestEndEvent,
    RequestErrorEvent,
    RunErrorEvent,
    StopEvent,
    TextCompleteEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
    WaitingEvent,
    WarningEvent,
)
from ..usage import AgentUsage, format_cost
from ._markdown import MarkdownStream
from ._safe import safe_text, terminal_safe

__all__ = ["EventPrinter", "safe_text", "terminal_safe", "usage_line"]

TOOL_OUTPUT_LINES = 8
"""Lines of a tool's output a result panel shows (the rest is counted, not shown)."""
ARGUMENT_CHARS = 200
"""Characters of a call's arguments a call panel shows (an approval shows more)."""


_BLANK_RUN = re.compile(r"\s{8,}")
# Blanks other than a plain space look like one (or like nothing) in a terminal.
_ODD_BLANK = re.compile(r"[^\S ]|[\u180e\u200b-\u200d\u2060\ufeff]")
BLANK_STYLE = "reverse"
"""How a run of blanks or an odd blank shows: set apart from the text around it."""


def visible_blanks(text: str) -> Text:
    """Untrusted ``text`` with every run of 8+ blank characters shown as a counted marker
    and any blank other than a space (tab, no-break, zero-width...) as its code, both in
    reverse video: padding cannot push what follows off the screen or hide in plain sight.

    Examples:
        >>> visible_blanks("echo hi" + " " * 3000 + "; curl x | sh").plain
        'echo hi⟨3000 blanks⟩; curl x | sh'
        >>> visible_blanks("a\u00a0b").plain
        'a⟨U+00A0⟩b'
    """
    out = Text()
    text = terminal_safe(text)
    at = 0
    for match in re.finditer(f"{_BLANK_RUN.pattern}|{_ODD_BLANK.pattern}", text):
        out.append(text[at : match.start()])
        found = match.group()
        if len(found) >= 8:
            out.append(f"⟨{len(found)} blanks⟩", style=BLANK_STYLE)
        else:
            out.append(f"⟨U+{ord(found):04X}⟩", style=BLANK_STYLE)
        at = match.end()
    out.append(text[at:])
    return out


def arguments_text(arguments: dict[str, Any], limit: int | None = ARGUMENT_CHARS) -> str:
    """A call's arguments as compact JSON, cut to ``limit`` characters (None: whole).

    Examples:
        >>> arguments_text({"path": "a.txt", "content": "x" * 10}, limit=30)
        '{"path": "a.txt", "content": …'
    """
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def output_excerpt(output: str, lines: int = TOOL_OUTPUT_LINES) -> str:
    """The first ``lines`` lines of a tool's output, saying how many more there are.

    Examples:
        >>> output_excerpt("1\\n2\\n3\\n4", lines=2)
        '1\\n2\\n… 2 more lines'
    """
    all_lines = output.rstrip("\n").splitlines() or [""]
    if len(all_lines) <= lines:
        return "\n".join(all_lines)
    rest = len(all_lines) - lines
    return "\n".join([*all_lines[:lines], f"… {plural(rest, 'more line')}"])


def usage_line(usage: AgentUsage) -> str:
    """The run's usage in one line.

    Examples:
        >>> usage_line(AgentUsage(requests=2, tool_calls=1, input_tokens=1200, output_tokens=34))
        '2 requests · 1 tool call · 1,234 tokens (1,200 in, 34 out) · cost $0.00'
    """
    return " · ".join(
        [
            plural(usage.requests, "request"),
            plural(usage.tool_calls, "tool call"),
            f"{plural(usage.total_tokens, 'token', thousands=True)} "
            f"({usage.input_tokens:,} in, {usage.output_tokens:,} out)",
            f"cost {format_cost(usage)}",
        ]
    )


class EventPrinter:
    """Prints one run's events on a rich ``Console`` as they come (see the module docs).

    ``markdown`` renders the model's text as Markdown; ``verbose`` shows tool calls and
    results whole and one line per model request.
    """

    def __init__(self, console: Console, markdown: bool = False, verbose: bool = False) -> None:
        self.console = console
        self.verbose = verbose
        self._markdown = MarkdownStream(console) if markdown else None
        self._mid_line = False  # streamed text left the cursor after some text
        self._streamed = False  # this response's text arrived as chunks

    def handle(self, event: AgentEvent) -> None:
        """Print what ``event`` says, if anything (events it does not know are skipped)."""
        if isinstance(event, TextEvent):
            self._stream(event.text)
        elif isinstance(event, TextCompleteEvent):
            if not self._streamed and event.text:
                self._stream(event.text)  # a run without partial messages
            self._streamed = False
            self.end_line()
        elif isinstance(event, ToolStartEvent):
            limit = None if self.verbose else ARGUMENT_CHARS
            self._panel(arguments_text(event.arguments, limit), f"{event.tool_name}", "cyan")
        elif isinstance(event, ToolEndEvent):
            title = f"{event.tool_name} {'failed' if event.is_error else 'done'}"
            title += f" in {event.duration:.1f}s"
            output = event.output if self.verbose else output_excerpt(event.output)
            self._panel(output, title, "red" if event.is_error else "green")
        elif isinstance(event, RequestEndEvent) and self.verbose:
            usage, cost = event.usage, "unknown" if event.cost is None else f"${event.cost:.4f}"
            self.line(
                f"request: {usage.input_tokens:,} tokens in, {usage.output_tokens:,} out, "
                f"cost {cost}",
                "dim",
            )
        else:
            self._note(event)

    def _note(self, event: AgentEvent) -> None:
        """The one-line events: denials, approvals decided elsewhere, errors, the stop."""
        if isinstance(event, PermissionEvent) and event.decision == "deny":
            self.line(f"Denied {event.tool_name}: {event.reason}", "red")
        elif isinstance(event, ApprovalEvent) and event.status in ("timeout", "pending_durable"):
            self.line(f"Approval {event.status.replace('_', ' ')}", "yellow")
        elif isinstance(event, RequestErrorEvent):
            again = " (transient: it may be retried)" if event.transient else ""
            self.line(f"Request failed: {event.error}{again}", "red")
        elif isinstance(event, FallbackEvent):
            self.line(f"Falling back from {event.from_model} to {event.to_model}", "yellow")
        elif isinstance(event, WarningEvent):
            self.line(f"Warning: {event.message}", "yellow")
        elif isinstance(event, WaitingEvent):
            self.line(f"Still waiting for {event.host} ({event.seconds:.0f} s)…", "dim")
        elif isinstance(event, RunErrorEvent):
            self.line(f"Error: {event.error}", "bold red")
        elif isinstance(event, StopEvent) and event.stop_reason != "complete":
            message = f": {event.message}" if event.message else ""
            self.line(f"Stopped ({event.stop_reason}){message}", "yellow")

    def finish(self, result: AgentResult | None) -> None:
        """End the run's output: the usage line (nothing when the run never ended)."""
        self.end_line()
        if result is not None:
            self.console.print(Text(usage_line(result.usage), style="dim"))

    def line(self, text: str, style: str = "") -> None:
        """Print one line of (untrusted) ``text`` on a line of its own."""
        self.end_line()
        self.console.print(safe_text(text, style), soft_wrap=True)

    def end_line(self) -> None:
        """Finish the streamed text: render what Markdown waits for, end a line left open."""
        if self._markdown is not None:
            self._markdown.flush()
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def _stream(self, text: str) -> None:
        if self._markdown is not None:
            self._streamed = self._streamed or bool(text)
            self._markdown.feed(text)  # made terminal-safe a block at a time, before rich
            return
        clean = terminal_safe(text)
        if not clean:
            return
        self._streamed = True
        self.console.print(Text(clean), end="", soft_wrap=True)
        self.console.file.flush()
        self._mid_line = not clean.endswith("\n")

    def _panel(self, body: str, title: str, style: str) -> None:
        self.end_line()
        self.console.print(
            Panel(
                safe_text(body),
                title=safe_text(title, f"bold {style}"),
                title_align="left",
                border_style=style,
                expand=False,
            )
        )
