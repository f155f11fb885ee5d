"""The offline demo model, ``deputy/demo``: a scripted walkthrough, not an LLM.

It lets the app and the examples run with no API key and no network, and shows a new
user what an agent here can do. It says so plainly: its first reply introduces it as
a scripted demo, explains how to use a real model and offers a short menu. After that
it looks for a few keywords in the user's message and calls one tool for each:

=====================  ==============  ==============================================
the message has        tool called     what the follow-up reply does with the result
=====================  ==============  ==============================================
"list", "files"        ``list_files``  counts and names the entries
"read <file>"          ``read_file``   quotes the first lines (default ``welcome.md``)
"write", "note"        ``write_file``  says whether the write happened or was denied
"ask", "question"      ``ask_user``    reflects the answers, or the decline
"dangerous", "rm"      ``run_bash``    ``rm -rf /``: explains the denial it gets back
"run `<command>`"      ``run_bash``    quotes the command's output (it runs sandboxed)
"research <topic>"     ``delegate``    hands the topic to a research team (below)
=====================  ==============  ==============================================

The research team (a :class:`~deputy_shiny.delegation.LeadAgent` whose subagents run on
the demo model too): the lead delegates to ``researcher``, then passes its notes to
``writer``, then gives the writer's text as its answer. The demo recognises a subagent
by its system prompt: one beginning :data:`RESEARCHER_ROLE` lists the workspace, reads
``welcome.md`` and reports what it found; one beginning :data:`WRITER_ROLE` turns the
notes in its task into a short answer. Every step is scripted, offline and the same
each time. In the ``deputy`` command (a system prompt beginning :data:`TERMINAL_ROLE`)
it words its replies for a terminal (:mod:`~deputy_shiny.models._demo_wording`).

When several keywords appear, the earliest wins. The demo only calls tools the request
offers; otherwise it says which tool is missing. Other messages get canned replies
that quote the message back. Replies stream in small chunks with a tiny delay, so
streaming is visible, and cost nothing (cost 0.0).

Examples:
    >>> from deputy_shiny.models.demo import demo_reply
    >>> reply = demo_reply([{"role": "user", "content": "Hello"}], [])
    >>> "scripted replies, not an LLM" in reply.text
    True
    >>> tools = [{"type": "function", "function": {"name": "list_files"}}]
    >>> history = [
    ...     {"role": "user", "content": "Hello"},
    ...     {"role": "assistant", "content": reply.text},
    ...     {"role": "user", "content": "list files"},
    ... ]
    >>> [(c.name, c.arguments) for c in demo_reply(history, tools).tool_calls]
    [('list_files', {'path': '.'})]
"""

from __future__ import annotations

import re
import threading
from typing import Any, Final, Literal

from . import _custom_provider, _litellm
from ._chat_model import DEMO_PROVIDER
from ._demo_results import (
    _QUOTE_LIMIT,
    _REASON_LIMIT,
    DANGEROUS_COMMAND,
    DEFAULT_READ,
    NOTE_PATH,
    _all_tool_results,
    _calls_by_id,
    _clip,
    _finding,
    _follow_up,
    _text_of,
    _ToolResult,
    _trailing_tool_results,
)
from ._demo_wording import TERMINAL_ROLE, for_terminal
from ._replies import ScriptedReply, ScriptedToolCall

__all__ = [
    "CHUNK_DELAY",
    "CHUNK_SIZE",
    "INTRO",
    "MENU",
    "NOTE_PATH",
    "RESEARCHER_ROLE",
    "TERMINAL_ROLE",
    "WRITER_ROLE",
    "demo_reply",
    "ensure_demo_registered",
    "menu_for",
]

Step = Literal["list", "read", "write", "ask", "dangerous", "run", "research"]

CHUNK_SIZE: Final = 12
"""Characters per streamed chunk."""
CHUNK_DELAY: float = 0.012
"""Seconds between chunks: enough to see the text stream in, little enough not to wait.
Tests that drive many demo replies may set it to 0."""

RESEARCHER_ROLE: Final = "You are the researcher of a small research team"
"""How a researcher subagent's system prompt begins (the demo then plays that part)."""
WRITER_ROLE: Final = "You are the writer of a small research team"
"""How a writer subagent's system prompt begins (the demo then plays that part)."""

INTRO: Final = (
    "Hi! I'm the offline demo model — scripted replies, not an LLM. I don't understand "
    "what you write: I look for a few keywords and answer with canned text and tool "
    "calls, so you can try this app without an API key or network access. To use a real "
    "model, set DEPUTY_MODEL to a litellm model string (for example openai/gpt-4.1-mini "
    "or anthropic/claude-sonnet-4-5) and set that provider's API key (for example "
    "OPENAI_API_KEY or ANTHROPIC_API_KEY), then start again."
)

_MENU_ITEMS: Final[tuple[tuple[str, str], ...]] = (
    ("list_files", "- **list files**: I call `list_files` on your workspace."),
    ("read_file", "- **read welcome.md**: I call `read_file` and quote the first lines."),
    ("write_file", "- **write a note**: I call `write_file`; writes need your approval first."),
    ("ask_user", "- **ask me something**: I call `ask_user` and you answer in a form."),
    (
        "run_bash",
        "- **run a dangerous command**: I try `rm -rf /` with `run_bash`, and a hook blocks it.",
    ),
    (
        "run_bash",
        "- **run `ls -la`**: I run the command in backticks with `run_bash`, in the "
        "session's sandbox.",
    ),
    (
        "delegate",
        "- **research tides**: I delegate to a small team of subagents (a researcher, "
        "then a writer); the app's Team panel shows them at work.",
    ),
)
_MENU_HEAD: Final = "Things to try (type one):\n\n"
MENU: Final = _MENU_HEAD + "\n".join(line for _, line in _MENU_ITEMS)
"""The whole menu, for an agent that has every tool of the tour."""
_NO_TOUR: Final = (
    "This agent has none of the tools my tour uses, so there is nothing to try here but "
    "a canned reply. An app adds tools with `Agent(..., tools=[...])`."
)


def menu_for(available: list[str]) -> str:
    """The menu, offering only the steps whose tool the agent has.

    Examples:
        >>> print(menu_for(["list_files"]))
        Things to try (type one):
        <BLANKLINE>
        - **list files**: I call `list_files` on your workspace.
    """
    lines = [line for tool, line in _MENU_ITEMS if tool in available]
    return _MENU_HEAD + "\n".join(lines) if lines else _NO_TOUR


_PATTERNS: Final[tuple[tuple[Step, re.Pattern[str]], ...]] = (
    ("list", re.compile(r"\b(?:list|ls|files)\b", re.IGNORECASE)),
    ("read", re.compile(r"\b(?:read|open)\b", re.IGNORECASE)),
    ("write", re.compile(r"\b(?:write|writing|note|notes)\b", re.IGNORECASE)),
    ("ask", re.compile(r"\b(?:ask|question|questions|quiz)\b", re.IGNORECASE)),
    ("dangerous", re.compile(r"\b(?:dangerous|danger|rm)\b", re.IGNORECASE)),
    ("research", re.compile(r"\bresearch\b", re.IGNORECASE)),
)
_TOOL_FOR: Final[dict[Step, str]] = {
    "list": "list_files",
    "read": "read_file",
    "write": "write_file",
    "ask": "ask_user",
    "dangerous": "run_bash",
    "research": "delegate",
}
_RUN_COMMAND: Final = re.compile(r"\brun\s+`([^`]+)`", re.IGNORECASE)
_MENU_WORDS: Final = re.compile(r"\b(?:help|menu|tour|start|features)\b", re.IGNORECASE)
_READ_TARGET: Final = re.compile(
    r"\b(?:read|open)\s+(?:(?:me|the|file|contents of)\s+)*[`'\"]?([^\s`'\"]+)",
    re.IGNORECASE,
)

_LATER: Final = (
    'You wrote "{quote}". I can only echo that back: I\'m the scripted demo model, '
    "so I can't reason about it.",
    'Reply number {turn} from the demo model. Your message had {words} and began "{quote}". '
    "A real model would answer it properly.",
    'Noted: "{quote}". That is all a scripted demo can do with it; set DEPUTY_MODEL to a '
    "real model for an actual answer.",
    'Still the offline demo here (turn {turn}). I received "{quote}", {words} long, and I '
    "have no opinion about it because I'm not an LLM.",
)
_QUESTION: Final = (
    "You asked \"{quote}\" I can't answer questions: I'm the scripted demo model, not an "
    "LLM. With DEPUTY_MODEL set to a real model and its API key, you'd get an answer."
)
_EMPTY: Final = (
    "I didn't find any text in your message. (I'm the scripted demo model, not an LLM; "
    "set DEPUTY_MODEL and an API key to use a real one.)"
)
_HINT_WORDS: Final[tuple[tuple[str, str], ...]] = (
    ("list_files", "*list files*"),
    ("read_file", "*read welcome.md*"),
    ("write_file", "*write a note*"),
    ("ask_user", "*ask me something*"),
    ("run_bash", "*run a dangerous command*"),
)


def _hint(available: list[str]) -> str:
    words = [word for tool, word in _HINT_WORDS if tool in available]
    if not words:
        return ""
    return f"\n\nTo see a feature, type one of: {', '.join(words)} (or *help* for the menu)."


_NEXT: Final[dict[Step, str]] = {
    "list": "Next, try **list files**.",
    "read": "Next, try **read welcome.md**.",
    "write": "Next, try **write a note**: it needs your approval.",
    "ask": "Next, try **ask me something**.",
    "dangerous": "Next, try **run a dangerous command**.",
    "research": "Next, try **research tides**: a small team of subagents works on it.",
}
TOUR_DONE: Final = (
    "That's the tour. Everything I said was scripted; set DEPUTY_MODEL and the "
    "provider's API key to let a real model use these tools."
)

_NOTE_CONTENT: Final = (
    "# A note from the demo\n\n"
    "The scripted demo model (deputy/demo) wrote this file with the write_file tool.\n"
    "The app asked you first, because writes need a human's approval here.\n"
)

_QUESTIONS: Final[list[dict[str, Any]]] = [
    {
        "header": "Experience",
        "question": "How much have you used LLM agents before?",
        "options": [
            {"label": "Never", "description": "This is my first one."},
            {"label": "A little", "description": "I have tried a few."},
            {"label": "A lot", "description": "I build or use them often."},
        ],
        "multi_select": False,
    },
    {
        "header": "Interests",
        "question": "Which features do you care about most?",
        "options": [
            {"label": "Approvals", "description": "A human confirms risky tool calls."},
            {"label": "Hooks", "description": "Code that checks each tool call."},
            {"label": "Usage limits", "description": "Caps on requests, tokens and cost."},
        ],
        "multi_select": True,
    },
]

_lock = threading.Lock()


def demo_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    """The demo model's answer to a conversation (OpenAI chat format), free of charge.

    ``tools`` are the tool definitions the request offers (OpenAI format). When the
    conversation ends with tool results, the reply reads them; when it ends with a
    user message, the reply is the :data:`INTRO` and :data:`MENU` (first reply), a
    tool call for the earliest keyword, the menu again ("help"), or a canned reply
    that quotes the message (shortened, so a long or repetitive message never streams
    as 100 identical chunks).

    Examples:
        >>> history = [
        ...     {"role": "user", "content": "Hello"},
        ...     {"role": "assistant", "content": "Hi!"},
        ...     {"role": "user", "content": "What is 2 + 2?"},
        ... ]
        >>> "What is 2 + 2?" in demo_reply(history, []).text
        True
    """
    reply = _demo_reply(messages, tools)
    if _system_starts(messages, TERMINAL_ROLE) and reply.text:  # the `deputy` command
        return reply.model_copy(update={"text": for_terminal(reply.text)})
    return reply


def _demo_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    available = _tool_names(tools)
    role = _team_role(messages)
    if role is not None:
        return _researcher_reply(messages, available) if role == "researcher" else _writer(messages)
    results = _trailing_tool_results(messages)
    delegated = [r for r in results if r.tool_name == "delegate"]
    if delegated:
        return _after_delegate(delegated[0], messages, available)
    if results:
        text = "\n\n".join(_follow_up(result) for result in results)
        return _reply(f"{text} {_next_hint(messages, available)}".rstrip())
    turn = sum(1 for message in messages if message.get("role") == "assistant")
    user_text = _last_user_text(messages)
    step = _step_for(user_text)
    if turn == 0:
        if step is None:
            return _reply(f"{INTRO}\n\n{menu_for(available)}")
        prefix = f"{INTRO}\n\n{menu_for(available)}\n\n"
        return _tool_step(step, user_text, available, prefix=prefix)
    if not user_text:
        return _reply(_EMPTY)
    if step is not None:
        return _tool_step(step, user_text, available)
    if _MENU_WORDS.search(user_text):
        menu = menu_for(available)
        return _reply(f"Here is the menu again (I'm the scripted demo model).\n\n{menu}")
    quote = _shorten(user_text)
    count = len(user_text.split())
    words = f"{count} word{'s' if count != 1 else ''}"
    asked = user_text.rstrip().endswith("?")
    template = _QUESTION if asked else _LATER[(turn - 1) % len(_LATER)]
    return _reply(template.format(quote=quote, turn=turn + 1, words=words) + _hint(available))


def ensure_demo_registered() -> None:
    """Register the ``deputy/demo`` provider with litellm (idempotent, thread-safe).

    Registration is deferred until litellm is imported; nothing is imported here.

    Examples:
        >>> from deputy_shiny.models.demo import ensure_demo_registered
        >>> ensure_demo_registered()
        >>> ensure_demo_registered()  # a second call does nothing
    """
    with _lock:
        if not _litellm.is_registered(DEMO_PROVIDER):
            _custom_provider.register_source(DEMO_PROVIDER, _DemoSource(), weak=False)


class _DemoSource:
    """Answers demo requests without recording them (the demo runs for the app's lifetime)."""

    def _scripted_response(self, request: dict[str, Any]) -> object:
        return demo_reply(request["messages"], request["tools"])


# --------------------------------------------------------------------------- requests


def _reply(text: str, tool_calls: list[ScriptedToolCall] | None = None) -> ScriptedReply:
    return ScriptedReply(
        text=text, tool_calls=tool_calls, cost=0.0, chunk_size=CHUNK_SIZE, delay=CHUNK_DELAY
    )


def _step_for(text: str) -> Step | None:
    """The walkthrough step of the earliest keyword in ``text``, if any."""
    if _RUN_COMMAND.search(text):
        return "run"  # the command's own words are no keywords
    found = [(m.start(), step) for step, pattern in _PATTERNS if (m := pattern.search(text))]
    return min(found)[1] if found else None


def _tool_step(step: Step, user_text: str, available: list[str], prefix: str = "") -> ScriptedReply:
    name = "run_bash" if step == "run" else _TOOL_FOR[step]
    if name not in available:
        offered = ", ".join(f"`{n}`" for n in available) if available else "no tools at all"
        return _reply(
            f"{prefix}For that I would call the `{name}` tool, but this agent wasn't given "
            f"it (it has {offered}). I'm the scripted demo model, so I won't improvise "
            f"another way. An app adds the tool with `Agent(..., tools=[...])`."
        )
    if step == "list":
        text = "Scripted step: you mentioned listing files, so I call `list_files` on `.`."
        call = ScriptedToolCall("list_files", {"path": "."})
    elif step == "read":
        path = _read_target(user_text)
        text = f"Scripted step: you asked to read a file, so I call `read_file` on `{path}`."
        call = ScriptedToolCall("read_file", {"path": path})
    elif step == "write":
        text = (
            f"Scripted step: I call `write_file` to create `{NOTE_PATH}`. In this app a "
            "write needs your approval first (a dialog: approve or deny) unless the "
            "permission mode refuses it outright. I'll report what happened."
        )
        call = ScriptedToolCall("write_file", {"path": NOTE_PATH, "content": _NOTE_CONTENT})
    elif step == "ask":
        text = (
            "Scripted step: I call `ask_user` with two questions. Answer them in the form "
            "(or decline) and I'll reflect your answers."
        )
        call = ScriptedToolCall("ask_user", {"questions": _QUESTIONS})
    elif step == "research":
        topic = _research_topic(user_text)
        text = (
            "Scripted step: I hand this to my team. First the `researcher` subagent looks "
            "through the workspace, then the `writer` turns its notes into a short answer "
            "(the app's Team panel shows them at work)."
        )
        task = f"Research {topic}: look through the workspace files and report what they say."
        call = ScriptedToolCall("delegate", {"agent": "researcher", "task": task})
    elif step == "run":
        match = _RUN_COMMAND.search(user_text)
        command = match.group(1).strip() if match else "true"
        text = (
            "Scripted step: I call `run_bash` with your command. It runs in this "
            "session's sandbox (its workspace only, no network), after your approval."
        )
        call = ScriptedToolCall("run_bash", {"command": command})
    else:
        text = (
            f"Scripted step: I ask `run_bash` to run `{DANGEROUS_COMMAND}`, which would "
            "try to delete everything. Watch the safety hook stop it before it runs."
        )
        call = ScriptedToolCall("run_bash", {"command": DANGEROUS_COMMAND})
    return _reply(prefix + text, [call])


def _read_target(text: str) -> str:
    """The file named after "read" (a word with a dot or a slash), else welcome.md."""
    match = _READ_TARGET.search(text)
    if match:
        candidate = match.group(1).rstrip(".,;:!?)]")
        if candidate and ("." in candidate or "/" in candidate):
            return candidate
    return DEFAULT_READ


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    names = []
    for spec in tools or ():
        function = spec.get("function") if isinstance(spec, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.append(name)
    return names


def _next_hint(messages: list[dict[str, Any]], available: list[str]) -> str:
    """Suggest the first walkthrough step not done yet whose tool is offered.

    Once every step is done, the end of the tour is announced once, then nothing.
    """

    def undone(calls: dict[str, tuple[str | None, dict[str, Any]]]) -> list[Step]:
        done = {name for name, _ in calls.values()}
        return [s for s, name in _TOOL_FOR.items() if name in available and name not in done]

    left = undone(_calls_by_id(messages))
    if left:
        return _NEXT[left[0]]
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    last_call = assistants[-1] if assistants else 0
    return TOUR_DONE if undone(_calls_by_id(messages[:last_call])) else ""


# --------------------------------------------------------------------------- research team

_RESEARCH_TOPIC: Final = re.compile(r"\bresearch\s+(?:(?:about|on|into|the topic)\s+)?(.*)", re.I)
_TASK_TOPIC: Final = re.compile(r"^(?:Research|Write a short answer about) (.+?)(?::| from )")
_NOTES_LIMIT: Final = 1500
_TEAM_NOTE: Final = (
    "(Scripted demo: the lead, the researcher and the writer all ran on the demo model; "
    "the Team panel shows each delegation and its transcript.)"
)


def _team_role(messages: list[dict[str, Any]]) -> Literal["researcher", "writer"] | None:
    """Which research-team subagent this request is for (by its system prompt), if any."""
    if _system_starts(messages, RESEARCHER_ROLE):
        return "researcher"
    return "writer" if _system_starts(messages, WRITER_ROLE) else None


def _system_starts(messages: list[dict[str, Any]], role: str) -> bool:
    """True when the conversation's system prompt begins with ``role``."""
    return any(
        m.get("role") == "system" and _text_of(m.get("content")).lstrip().startswith(role)
        for m in messages
    )


def _research_topic(text: str) -> str:
    match = _RESEARCH_TOPIC.search(text)
    topic = _shorten(match.group(1)).rstrip(".?!") if match else ""
    return topic or "the workspace"


def _task_topic(messages: list[dict[str, Any]]) -> str:
    """The topic named in a subagent's task (its first user message)."""
    task = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    match = _TASK_TOPIC.search(task.strip())
    return match.group(1) if match else "the workspace"


def _after_delegate(
    result: _ToolResult, messages: list[dict[str, Any]], available: list[str]
) -> ScriptedReply:
    """The lead's next step once a subagent answered: the writer, then the final answer."""
    agent = result.arguments.get("agent")
    task = str(result.arguments.get("task") or "")
    match = _TASK_TOPIC.search(task)
    topic = match.group(1) if match else "the workspace"
    answer = result.content.strip()
    if answer.startswith(("Delegation refused", "Delegation failed", "The subagent ")):
        return _reply(
            f"My team could not finish: `delegate` answered *{_clip(answer, _REASON_LIMIT)}* "
            "(Scripted demo reply: I stop here rather than improvise.)"
        )
    if agent == "researcher":
        notes = _clip(answer, _NOTES_LIMIT)
        text = (
            f"The researcher reported back ({len(answer)} characters). Scripted step: I "
            "pass its notes to the `writer` subagent."
        )
        writer_task = f"Write a short answer about {topic} from these research notes:\n\n{notes}"
        call = ScriptedToolCall("delegate", {"agent": "writer", "task": writer_task})
        return _reply(text, [call])
    quoted = "\n".join(f"> {line}" if line else ">" for line in answer.splitlines())
    text = f"Here is my team's answer about {topic}:\n\n{quoted}\n\n{_TEAM_NOTE}"
    return _reply(f"{text} {_next_hint(messages, available)}".rstrip())


def _researcher_reply(messages: list[dict[str, Any]], available: list[str]) -> ScriptedReply:
    """The researcher: list the workspace, read welcome.md, report what it found."""
    topic = _task_topic(messages)
    done = {name for name, _ in _calls_by_id(messages).values()}
    if "list_files" not in done and "list_files" in available:
        text = "Scripted researcher step: I list the workspace to see what is there."
        return _reply(text, [ScriptedToolCall("list_files", {"path": "."})])
    if "read_file" not in done and "read_file" in available:
        text = f"Scripted researcher step: I read `{DEFAULT_READ}`."
        return _reply(text, [ScriptedToolCall("read_file", {"path": DEFAULT_READ})])
    findings = [_finding(r) for r in _all_tool_results(messages)] or [
        "I had no tools to look with."
    ]
    return _reply(
        f"Research notes on {topic} (scripted researcher on the demo model):\n\n"
        + "\n".join(f"- {f}" for f in findings)
        + "\n- Nothing here is about the topic itself: a scripted demo only reports what "
        "the workspace holds."
    )


def _writer(messages: list[dict[str, Any]]) -> ScriptedReply:
    """The writer: a short answer made of the notes in its task."""
    topic = _task_topic(messages)
    task = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    notes = [
        line.strip().lstrip("- ").strip()
        for line in task.splitlines()
        if line.strip().startswith("- ")
    ]
    sentences = [n if n.endswith((".", "!", "?")) else n + "." for n in notes[:3]]
    body = " ".join(sentences) if sentences else "the researcher sent no notes."
    return _reply(
        f"On {topic}, in short: {_clip(body, 600)} (Scripted writer on the demo model: it "
        "rearranges the researcher's notes; a real model would write a real answer.)"
    )


# --------------------------------------------------------------------------- text helpers


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text_of(message.get("content")).strip()
    return ""


def _shorten(text: str) -> str:
    return _clip(re.sub(r"\s+", " ", text).strip(), _QUOTE_LIMIT)
