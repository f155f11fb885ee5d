"""How the demo model reads tool results back: each matched to its call, then told.

The scripted follow-up for every tool of the tour (:func:`_follow_up`), the denial
wording, what the research team's researcher noted (:func:`_finding`), and the small
text helpers (clip, fence) these replies share with :mod:`~deputy_shiny.models.demo`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

NOTE_PATH: Final = "notes/demo-note.md"
DANGEROUS_COMMAND: Final = "rm -rf /"
DEFAULT_READ: Final = "welcome.md"

_RUN_OUTPUT_LINES: Final = 40
_NUMBERED_LINE: Final = re.compile(r"^\s*\d+\t(.*)$")
_QUOTE_LIMIT: Final = 60
_LINE_LIMIT: Final = 100
_QUOTED_LINES: Final = 5
_LISTED_ENTRIES: Final = 12
_REASON_LIMIT: Final = 240


@dataclass(frozen=True)
class _ToolResult:
    tool_name: str | None
    arguments: dict[str, Any]
    content: str


def _trailing_tool_results(messages: list[dict[str, Any]]) -> list[_ToolResult]:
    """The tool results after the last assistant message, matched to their calls."""
    tail: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        tail.append(message)
    if not tail:
        return []
    calls = _calls_by_id(messages)
    results = []
    for message in reversed(tail):
        name, arguments = calls.get(str(message.get("tool_call_id")), (None, {}))
        results.append(_ToolResult(name, arguments, _text_of(message.get("content"))))
    return results


def _calls_by_id(messages: list[dict[str, Any]]) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """Every tool call in the conversation: id -> (tool name, arguments)."""
    calls: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError):
                arguments = {}
            calls[str(call.get("id"))] = (
                function.get("name"),
                arguments if isinstance(arguments, dict) else {},
            )
    return calls


def _follow_up(result: _ToolResult) -> str:
    content = result.content.strip()
    name = result.tool_name
    if content.startswith("Denied:"):
        return _denied(result, content)
    if name == "list_files":
        return _after_list(content)
    if name == "read_file":
        return _after_read(result, content)
    if name == "write_file":
        if not content.startswith(("Wrote ", "Appended ")):
            return (
                f"The write did not happen: `write_file` answered "
                f"*{_clip(content, _REASON_LIMIT)}* (Scripted demo reply.)"
            )
        return (
            f"The write happened. `write_file` answered: {_clip(content, _REASON_LIMIT)} "
            "The note is in the agent's working directory now (the app's workspace panel "
            f"lists it); try **read {NOTE_PATH}** to see it. (Scripted demo reply; the "
            "tool was real.)"
        )
    if name == "ask_user":
        return _after_ask(content)
    if name == "run_bash" and result.arguments.get("command") != DANGEROUS_COMMAND:
        return (
            "The command ran in the sandbox. Its output:\n\n"
            f"{_fenced(_first_lines(content, _RUN_OUTPUT_LINES))}\n\n(Scripted demo reply.)"
        )
    if name == "run_bash":
        return (
            "The command was **not** blocked: this agent has no hook that stops dangerous "
            "commands, so `run_bash` ran it (rm refuses to delete `/` by itself). Its "
            f"output:\n\n{_fenced(_first_lines(content, _QUOTED_LINES))}\n\nAdd "
            "`hook_block_dangerous_bash()` to the agent's hooks to stop such commands. "
            "(Scripted demo reply.)"
        )
    return (
        f"The scripted demo got a result from `{name or 'a tool'}` that it has no script "
        f"for. It begins:\n\n{_fenced(_first_lines(content, _QUOTED_LINES))}"
    )


def _denied(result: _ToolResult, content: str) -> str:
    reason = _clip(content.removeprefix("Denied:").strip(), _REASON_LIMIT)
    name = result.tool_name or "the tool"
    if name == "run_bash" and reason.startswith("Blocked a dangerous command"):
        return (
            f"Blocked, as it should be. The call to `run_bash` came back denied: *{reason}* "
            "Nothing ran: the agent checks every tool call before running it, and the "
            "`hook_block_dangerous_bash()` hook read the command first. The run goes on; "
            "the model just reads the denial. (Scripted demo reply.)"
        )
    if name == "write_file":
        return (
            f"The write did not happen: the call to `write_file` was denied: *{reason}* "
            f"Nothing was written, and the conversation carries on; denied calls reach the "
            "model as a result like any other. (Scripted demo reply.)"
        )
    return (
        f"The call to `{name}` was denied before it ran: *{reason}* The agent checks every "
        "tool call against its permissions (the app's permission mode, for one); the model "
        "only reads the denial. (Scripted demo reply.)"
    )


def _after_list(content: str) -> str:
    lines = [line for line in content.splitlines() if line.strip()]
    entries = [line for line in lines[1:] if not line.startswith("[")]
    if not entries:
        summary = f"`list_files` answered: {_clip(lines[0] if lines else content, 200)}"
    else:
        shown = ", ".join(f"`{_clip(e, _QUOTE_LIMIT)}`" for e in entries[:_LISTED_ENTRIES])
        more = len(entries) - _LISTED_ENTRIES
        extra = f" and {more} more" if more > 0 else ""
        folders = sum(1 for e in entries if e.endswith("/"))
        kinds = _count(len(entries) - folders, "file")
        if folders:
            kinds += " and " + _count(folders, "folder")
        summary = f"`list_files` found {kinds} in the workspace: {shown}{extra}."
    return f"{summary} (Scripted summary: I count the lines of the result.)"


def _after_read(result: _ToolResult, content: str) -> str:
    path = str(result.arguments.get("path") or "the file")
    lines = content.splitlines()
    numbered = [m.group(1) for line in lines if (m := _NUMBERED_LINE.match(line))]
    if not numbered:
        return (
            f"`read_file` could not read `{_clip(path, _QUOTE_LIMIT)}`. It answered: "
            f"*{_clip(content, _REASON_LIMIT)}* (Scripted demo reply.) Try **list files** "
            "to see what is there."
        )
    quoted = [_clip(line, _LINE_LIMIT) for line in numbered[:_QUOTED_LINES]]
    rest = len(numbered) - len(quoted)
    more = f"({rest} more line{'s' if rest != 1 else ''} not quoted.) " if rest > 0 else ""
    return (
        f"Here are the first lines of `{_clip(path, _QUOTE_LIMIT)}`, as `read_file` returned "
        f"them:\n\n{_fenced(chr(10).join(quoted))}\n\n{more}I only quote the result: a "
        "scripted demo can't summarise it."
    )


def _after_ask(content: str) -> str:
    if content.startswith("The user declined"):
        return (
            "You declined to answer, and that's fine: `ask_user` told me so and the run went "
            "on. (Scripted demo reply.)"
        )
    answers = _parse_answers(content)
    if not answers:
        return (
            f"`ask_user` did not bring answers back. It said: *{_clip(content, _REASON_LIMIT)}* "
            "(Scripted demo reply.)"
        )
    said = "; ".join(f"{header}: **{_clip(answer, _QUOTE_LIMIT)}**" for header, answer in answers)
    return (
        f"Thanks! You answered {said}. I'm scripted, so I just repeat your answers; a real "
        "model would use them to decide what to do next."
    )


def _parse_answers(content: str) -> list[tuple[str, str]]:
    answers: list[tuple[str, str]] = []
    header: str | None = None
    for line in content.splitlines():
        heading = re.match(r"^\[(.+?)\] ", line)
        if heading:
            header = heading.group(1)
            continue
        answer = re.match(r"^Answer(?: \(free text\))?: (.*)$", line)
        if answer and header is not None:
            answers.append((header, answer.group(1)))
            header = None
    return answers


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _finding(result: _ToolResult) -> str:
    content = result.content.strip()
    if result.tool_name == "list_files":
        entries = [line for line in content.splitlines()[1:] if line and not line.startswith("[")]
        shown = ", ".join(_clip(e, _QUOTE_LIMIT) for e in entries[:_LISTED_ENTRIES])
        counted = _count(len(entries), "entry", "entries")
        return f"The workspace holds {counted}: {shown or 'nothing'}."
    if result.tool_name == "read_file":
        lines = [m.group(1) for line in content.splitlines() if (m := _NUMBERED_LINE.match(line))]
        first = next((line.strip("# ").strip() for line in lines if line.strip()), "")
        if not first:
            return f"`{DEFAULT_READ}` could not be read: {_clip(content, _REASON_LIMIT)}"
        return f"`{DEFAULT_READ}` has {_count(len(lines), 'line')}; it begins: {_clip(first, 120)}"
    return f"`{result.tool_name}` said: {_clip(content, _REASON_LIMIT)}"


def _all_tool_results(messages: list[dict[str, Any]]) -> list[_ToolResult]:
    calls = _calls_by_id(messages)
    results = []
    for message in messages:
        if message.get("role") == "tool":
            name, arguments = calls.get(str(message.get("tool_call_id")), (None, {}))
            results.append(_ToolResult(name, arguments, _text_of(message.get("content"))))
    return results


# --------------------------------------------------------------------------- text helpers


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return " ".join(parts)
    return ""


def _clip(text: str, limit: int) -> str:
    flat = text.strip()
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def _first_lines(text: str, count: int) -> str:
    return "\n".join(_clip(line, _LINE_LIMIT) for line in text.splitlines()[:count])


def _fenced(text: str) -> str:
    """``text`` in a code fence longer than any backtick run inside it (renders as code)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"
