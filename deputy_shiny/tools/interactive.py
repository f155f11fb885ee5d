"""Human in the loop: the ``ask_user`` tool asks the user multiple-choice questions.

The model sends 1-4 questions, each with 2-4 options and an optional multi-select; the
user may always answer in free text instead ("Other"). Who asks is decided per call:

1. the callback given to :func:`tool_ask_user` / :func:`tools_interactive` (each tool
   owns its callback and routing context, so concurrent agents never see each other's
   questions);
2. else the process-wide fallback set by :func:`set_ask_user_callback` (for
   single-agent scripts, never for concurrent hosts);
3. else, when standard input is an interactive console, a prompt on the console;
4. else an error result at once (nothing ever blocks on ``input()`` without a console).

A callback receives ``(questions, context)`` -- a list of :class:`Question` and an
:class:`AskUserContext` -- and returns one answer per question: a list of the chosen
option labels, or a string of free text. It returns them either as a list in question
order or as a dict mapping each question's text
(``Question.question``) to its answer; a dict that misses a question or names one that
was not asked is an error result. The model gets the answers in question order either
way. A callback may be sync (run in a worker thread) or async (awaited), and may raise
:class:`AskUserDeclined`.

Examples:
    >>> import asyncio
    >>> from deputy_shiny.tools.interactive import tool_ask_user
    >>> def pick_first(questions, context):
    ...     return [[q.options[0].label] for q in questions]
    >>> ask = tool_ask_user(callback=pick_first)
    >>> args = ask.parse_arguments({"questions": [{
    ...     "header": "Format", "question": "Which output format?", "multi_select": False,
    ...     "options": [{"label": "CSV", "description": "Plain table"},
    ...                 {"label": "JSON", "description": "Nested data"}]}]})
    >>> print(asyncio.run(ask.invoke(args)))
    The user answered:
    [Format] Which output format?
    Answer: CSV
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._util.callables import is_async_callable
from ..errors import AskUserDeclined, ToolInvocationError
from ..identity import CallIdentity
from ._context import current_tool_context
from ._tool import Tool, builtin_source, tool, tool_annotations

__all__ = [
    "Answer",
    "Answers",
    "AskUserCallback",
    "AskUserContext",
    "AskUserDeclined",
    "Option",
    "Question",
    "console_ask_user",
    "set_ask_user_callback",
    "tool_ask_user",
    "tools_interactive",
]

logger = logging.getLogger(__name__)

ASK_USER_ANNOTATIONS = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=False
)

DECLINED_MESSAGE = "The user declined to answer the questions."


# --------------------------------------------------------------------------- arguments


class Option(BaseModel):
    """One choice of a question.

    Examples:
        >>> Option(label="Yes", description="Go ahead").label
        'Yes'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    label: Annotated[str, Field(min_length=1)] = Field(
        description="The choice as shown to the user (1-5 words)."
    )
    description: str = Field(description="What choosing it means.")


class Question(BaseModel):
    """One multiple-choice question; the user may also answer in free text ("Other").

    Examples:
        >>> q = Question(header="Scope", question="Which files?", multi_select=True,
        ...              options=[Option(label="src", description="Source"),
        ...                       Option(label="tests", description="Tests")])
        >>> [o.label for o in q.options]
        ['src', 'tests']
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    header: Annotated[str, Field(min_length=1, max_length=12)] = Field(
        description="A very short label for the question (at most 12 characters)."
    )
    question: Annotated[str, Field(min_length=1)] = Field(
        description="The complete question to ask the user."
    )
    options: Annotated[list[Option], Field(min_length=2, max_length=4)] = Field(
        description="2-4 choices. Do not add an 'Other' choice: free text is always allowed."
    )
    multi_select: bool = Field(description="True if the user may choose several options.")

    @field_validator("options")
    @classmethod
    def _unique_labels(cls, options: list[Option]) -> list[Option]:
        seen: set[str] = set()
        for option in options:
            if option.label in seen:
                raise ValueError(f"option labels must be unique; {option.label!r} is repeated")
            seen.add(option.label)
        return options

    @property
    def labels(self) -> list[str]:
        """The option labels, in order."""
        return [o.label for o in self.options]


Answer: TypeAlias = list[str] | str
"""One answer: the chosen option labels, or the user's free text."""


@dataclass(frozen=True)
class AskUserContext(CallIdentity):
    """What an ask_user callback learns about the call, for routing the questions.

    Attributes:
        value: The tool's own routing context (``tools_interactive(context=...)``),
            evaluated now when it was given as a zero-argument function.
        agent_id / session_id / run_id / call_id: Who is asking, from the tool context.
        run_context: The run's context (a copy).

    Examples:
        >>> AskUserContext(value={"room": "a"}, session_id="s1").value["room"]
        'a'
    """

    value: Any = None
    run_context: Mapping[str, Any] = field(default_factory=dict, compare=False)


Answers: TypeAlias = Sequence[Answer] | Mapping[str, Answer]
"""A callback's answers: a list in question order, or a dict keyed by question text."""

AskUserCallback: TypeAlias = Callable[
    [list[Question], AskUserContext], Answers | Awaitable[Answers]
]
"""``callback(questions, context) -> answers`` (sync or async); may raise AskUserDeclined.

The answers are a list in question order or a dict ``{question text: answer}``."""


# --------------------------------------------------------------------------- fallback

_fallback_lock = threading.Lock()
_fallback: AskUserCallback | None = None


def set_ask_user_callback(callback: AskUserCallback | None) -> AskUserCallback | None:
    """Set the process-wide ask_user callback used by tools that have none; return the old one.

    A compatibility fallback for single-agent scripts: concurrent hosts (Shiny) must give
    each agent its own ``tools_interactive(callback=...)``. ``None`` clears it.

    Examples:
        >>> previous = set_ask_user_callback(lambda questions, context: ["yes"])
        >>> _ = set_ask_user_callback(previous)
    """
    global _fallback
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    with _fallback_lock:
        previous, _fallback = _fallback, callback
    return previous


def _current_fallback() -> AskUserCallback | None:
    with _fallback_lock:
        return _fallback


# --------------------------------------------------------------------------- console

_console_lock = threading.Lock()


def _stdin_is_console() -> bool:
    try:
        return bool(sys.stdin is not None and sys.stdin.isatty())
    except (AttributeError, ValueError, OSError):  # replaced, closed or detached stdin
        return False


def _console_answer(question: Question) -> Answer:
    """Ask one question on the console (runs in a worker thread)."""
    print(f"\n[{question.header}] {question.question}")
    for index, option in enumerate(question.options, 1):
        print(f"  {index}. {option.label} - {option.description}")
    other = len(question.options) + 1
    print(f"  {other}. Other (type your own answer)")
    hint = "numbers separated by commas" if question.multi_select else "a number"
    for _ in range(3):
        reply = input(f"Your choice ({hint}, or type an answer): ").strip()
        parts = [p.strip() for p in reply.split(",") if p.strip()]
        if parts and all(p.isdigit() for p in parts):
            numbers = [int(p) for p in parts]
            if numbers == [other]:
                return input("Your answer: ").strip()
            if not all(1 <= n <= len(question.options) for n in numbers):
                print(f"Choose numbers from 1 to {other}.")
                continue
            if len(numbers) > 1 and not question.multi_select:
                print("Choose one number.")
                continue
            return [question.options[n - 1].label for n in dict.fromkeys(numbers)]
        if reply:
            return reply
        print("Please choose an option or type an answer.")
    raise AskUserDeclined("no valid answer on the console")


def console_ask_user(questions: list[Question], context: AskUserContext) -> list[Answer]:
    """Ask the questions on the console with ``input()`` (the fallback in a terminal).

    Each question shows numbered options plus "Other"; the user types a number (several,
    comma-separated, for multi-select) or free text. End of input declines.

    Examples:
        >>> callable(console_ask_user)  # calling it would read from the terminal
        True
    """
    with _console_lock:
        try:
            return [_console_answer(q) for q in questions]
        except (EOFError, KeyboardInterrupt):
            raise AskUserDeclined("input ended") from None


# --------------------------------------------------------------------------- the tool


def _answers_by_question(questions: list[Question], answers: Mapping[Any, Any]) -> list[Any]:
    """A dict ``{question text: answer}`` as a list in question order (or an error)."""
    texts = [q.question for q in questions]
    unknown = [key for key in answers if key not in texts]
    missing = [text for text in dict.fromkeys(texts) if text not in answers]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"no answer for {', '.join(repr(t) for t in missing)}")
        if unknown:
            problems.append(
                f"answers for questions that were not asked: {', '.join(repr(k) for k in unknown)}"
            )
        raise ToolInvocationError(
            f"ask_user: the question callback returned a dict with {'; and '.join(problems)}. "
            "A dict must map each question's text to its answer."
        )
    return [answers[text] for text in texts]


def _check_answers(questions: list[Question], answers: Any) -> list[Answer]:
    """The callback's answers, validated against the questions (ToolInvocationError if not).

    ``answers`` is a list in question order or a dict keyed by question text; the result
    is always a list in question order.
    """
    if isinstance(answers, Mapping):
        answers = _answers_by_question(questions, answers)
    if isinstance(answers, (str, bytes)) or not isinstance(answers, Sequence):
        raise ToolInvocationError(
            "ask_user: the question callback returned "
            f"{type(answers).__name__}; it must return a list with one answer per question "
            "(or a dict mapping each question's text to its answer)."
        )
    if len(answers) != len(questions):
        raise ToolInvocationError(
            f"ask_user: the question callback returned {len(answers)} answers for "
            f"{len(questions)} questions."
        )
    checked: list[Answer] = []
    for number, (question, answer) in enumerate(zip(questions, answers, strict=True), 1):
        where = f"ask_user: answer {number} ({question.header!r})"
        if isinstance(answer, str):
            checked.append(answer)
            continue
        if isinstance(answer, (bytes, Mapping)) or not isinstance(answer, Sequence):
            raise ToolInvocationError(
                f"{where} is a {type(answer).__name__}; it must be a list of option labels "
                "or a string of free text."
            )
        labels = list(answer)
        if not all(isinstance(label, str) for label in labels):
            raise ToolInvocationError(f"{where} must list option labels as strings.")
        unknown = [label for label in labels if label not in question.labels]
        if unknown:
            raise ToolInvocationError(
                f"{where} chose {', '.join(repr(u) for u in unknown)}, not among the options "
                f"{question.labels}; return free text as a string instead."
            )
        if not question.multi_select and len(labels) != 1:
            raise ToolInvocationError(
                f"{where} chose {len(labels)} options for a single-choice question."
            )
        checked.append(list(dict.fromkeys(labels)))
    return checked


def _format_answers(questions: list[Question], answers: list[Answer]) -> str:
    lines = ["The user answered:"]
    for question, answer in zip(questions, answers, strict=True):
        lines.append(f"[{question.header}] {question.question}")
        if isinstance(answer, str):
            lines.append(f"Answer (free text): {answer or '(empty)'}")
        else:
            lines.append(f"Answer: {', '.join(answer) if answer else '(none selected)'}")
    return "\n".join(lines)


async def _resolve_context(context: Any) -> Any:
    if callable(context):
        value = context()
        if inspect.isawaitable(value):
            value = await value
        return value
    return context


async def _call(callback: AskUserCallback, questions: list[Question], ctx: AskUserContext) -> Any:
    if is_async_callable(callback):
        return await callback(questions, ctx)  # type: ignore[misc]
    result = await asyncio.to_thread(callback, questions, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result


class _AskUser:
    """One ``ask_user`` tool's callback and context; the tool is its bound method.

    A method of a module-level class, not a closure: its arguments schema (a pydantic
    model) is then built once a process and shared, where a closure made one for every
    session of a chat app (and ``typing`` kept the newest 128 of them alive).
    """

    def __init__(self, callback: AskUserCallback | None, context: Any) -> None:
        self.callback = callback
        self.context = context

    async def ask_user(
        self,
        questions: Annotated[list[Question], Field(min_length=1, max_length=4)],
    ) -> str:
        """Ask the user 1-4 multiple-choice questions and wait for the answers.

        Use it to clarify requirements, choose between approaches or confirm a decision.
        Each question has 2-4 options; the user may always answer in their own words
        instead, so do not add an "Other" option.

        Args:
            questions: The questions to ask (1-4), answered together.
        """
        questions = list(questions)
        handler: AskUserCallback | None = self.callback or _current_fallback()
        if handler is None:
            if not _stdin_is_console():
                raise ToolInvocationError(
                    "ask_user is not available: no one can answer questions here (no "
                    "callback and no interactive console). Continue without asking, and "
                    "state the assumptions you make."
                )
            handler = console_ask_user
        tool_ctx = current_tool_context()
        ask_ctx = AskUserContext(
            value=await _resolve_context(self.context),
            agent_id=tool_ctx.agent_id,
            session_id=tool_ctx.session_id,
            run_id=tool_ctx.run_id,
            call_id=tool_ctx.call_id,
            run_context=dict(tool_ctx.run_context),
        )
        try:
            answers = await _call(handler, questions, ask_ctx)
        except AskUserDeclined:
            return DECLINED_MESSAGE
        except ToolInvocationError:
            raise
        except Exception as e:
            logger.warning("ask_user callback failed", exc_info=True)
            raise ToolInvocationError(
                f"ask_user: asking the user failed ({type(e).__name__}: {e})."
            ) from None
        return _format_answers(questions, _check_answers(questions, answers))


def tool_ask_user(callback: AskUserCallback | None = None, context: Any = None) -> Tool:
    """Create the ``ask_user`` tool: the model asks the user 1-4 multiple-choice questions.

    Args:
        callback: ``callback(questions, context) -> answers``, sync or async: a list
            in question order, or a dict ``{question text: answer}``. None uses the
            process-wide fallback, else the console, else an error result.
        context: Routing data for the callback (``AskUserContext.value``); a
            zero-argument function is called at each call.

    Examples:
        >>> t = tool_ask_user(callback=lambda questions, context: ["free text"])
        >>> t.name, t.parameters["required"]
        ('ask_user', ['questions'])
    """
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    made = tool(
        _AskUser(callback, context).ask_user,
        name="ask_user",
        annotations=ASK_USER_ANNOTATIONS,
        source=builtin_source("ask"),
    )
    # Kept so a host (the Shiny kit) can check the tool answers to *its* session.
    made.ask_user_callback = callback  # type: ignore[attr-defined]
    return made


def tools_interactive(callback: AskUserCallback | None = None, context: Any = None) -> list[Tool]:
    """The interactive tools: ``[ask_user]``, fresh, owning ``callback`` and ``context``.

    Args:
        callback: See :func:`tool_ask_user`.
        context: See :func:`tool_ask_user`.

    Examples:
        >>> [t.name for t in tools_interactive(callback=lambda qs, ctx: ["ok"] * len(qs))]
        ['ask_user']
    """
    return [tool_ask_user(callback=callback, context=context)]
