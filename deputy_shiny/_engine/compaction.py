"""Compaction: counting the context, choosing what stays, and writing the summary.

Used by the engine (automatic compaction before a request, through
:class:`ContextRuntime` in :class:`~deputy_shiny._engine.deps.RunDeps`) and by
``agent.compact()``. One :class:`Compactor` does one compaction:

1. count the context (litellm's token counter, per turn, remembered per turn);
2. choose the newest turns that fit in ``compact_to * max_tokens`` (starting at a user
   turn when one fits; never between a tool request and its result);
3. ``PreCompact`` hooks may cancel or supply the summary;
4. otherwise the model writes it (then each ``summary_fallback_models`` entry); if all
   fail, ``fallback="text"`` uses a plain digest, ``"error"`` raises
   :class:`~deputy_shiny.errors.CompactionError`;
5. the summary joins the system prompt and the model's view starts at the kept turns;
   ``PostCompact`` hooks observe the record.

The conversation changes only in step 5, so a failure leaves it as it was.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util.interrupt import Guard, Interrupted
from ..context import CompactionRecord, ContextPolicy
from ..conversation import Conversation
from ..errors import CompactionError
from ..events import CompactionErrorEvent, CompactionEvent, CompactionStartEvent
from ..hooks import HookContext, HookRegistry, HookResultPreCompact, HookRun
from ..messages import ContentToolResult, Turn, to_openai_messages
from ..models import ChatModel
from ..models._provider import (
    ProviderFailed,
    Response,
    estimate_prompt_tokens,
    load_litellm,
    stream_response,
)
from .budget import _RequestRefused
from .offload import ToolResultStore

logger = logging.getLogger(__name__)

__all__ = [
    "SUMMARY_INSTRUCTIONS",
    "CompactionServices",
    "Compactor",
    "ContextRuntime",
    "SummaryCharge",
    "context_tokens",
    "count_tokens",
    "text_digest",
]

SUMMARY_INSTRUCTIONS = (
    "You are summarising the earlier part of a conversation between a user and an AI "
    "agent, so the agent can carry on without it. Write a concise summary that keeps "
    "the decisions made, findings, file names and paths, errors met, and the progress "
    "on the user's task, with anything still to do. Reply with the summary only."
)
"""The system prompt of a summary request (tests recognise summary requests by it)."""

_DIGEST_CHARS = 200
_TRANSCRIPT_RESULT_CHARS = 2_000
_NO_LIMIT_KEEP = 4

SummaryCharge = Callable[[ChatModel, Response, list[dict[str, Any]]], None]
"""Counts one summary request's usage: (model, its response, the messages sent)."""


async def _unguarded(awaitable: Coroutine[Any, Any, Any]) -> Any:
    return await awaitable


# ---------------------------------------------------------------- token counts


@functools.lru_cache(maxsize=256)
def _text_tokens(text: str) -> int:
    return _count_messages(({"role": "system", "content": text},))


def _count_messages(messages: Sequence[dict[str, Any]]) -> int:
    from ..models import _litellm

    try:
        counted = _litellm.get_litellm().token_counter(
            model="", messages=list(messages), use_default_image_token_count=True
        )
        return int(counted)
    except Exception:  # a message litellm cannot count: the character estimate
        return estimate_prompt_tokens(list(messages))


_EXACT_CHARS = 200_000
"""Past this size a turn is estimated (four characters a token), not tokenised: a
hostile 10 MB tool-call argument would take seconds to tokenise."""


def _turn_tokens(turn: Turn) -> int:
    messages = to_openai_messages(None, [turn], images=False, audio=False)
    estimate = estimate_prompt_tokens(messages)
    if estimate * 4 > _EXACT_CHARS:
        return estimate
    return _count_messages(messages)


@functools.lru_cache(maxsize=32)
def _schema_tokens(schemas_json: str) -> int:
    from ..models import _litellm

    try:
        return int(_litellm.get_litellm().token_counter(model="", text=schemas_json))
    except Exception:
        return max(1, len(schemas_json) // 4)


def tools_tokens(tool_schemas: Sequence[dict[str, Any]]) -> int:
    """Estimated tokens of the tool schemas sent with each request."""
    if not tool_schemas:
        return 0
    return _schema_tokens(json.dumps(list(tool_schemas), sort_keys=True, default=str))


def count_tokens(
    conversation: Conversation,
    tool_schemas: Sequence[dict[str, Any]],
    new: Turn,
    *,
    complete: bool,
) -> int:
    """The tokens of ``new`` (a user turn), as compaction counts a turn; with ``complete``
    the context the next request would send before it too (:func:`context_tokens`)."""
    tokens = _turn_tokens(new)
    return tokens + context_tokens(conversation, tool_schemas) if complete else tokens


def context_tokens(conversation: Conversation, tool_schemas: Sequence[dict[str, Any]] = ()) -> int:
    """Estimated tokens of what the next request sends: system prompt (with summary),
    the context turns and the tool schemas. litellm must be loaded."""
    prompt = conversation.system_prompt
    total = _text_tokens(prompt) if prompt else 0
    for turn in conversation.context_turns():
        total += conversation.turn_tokens(turn, _turn_tokens)
    return total + conversation.schema_tokens(tool_schemas, tools_tokens)


# ---------------------------------------------------------------- a bound without tokenising

# A cheap upper bound on what litellm's token_counter (model "") returns, so the check
# before each request need not tokenise while the context is far under max_tokens (litellm
# takes ~1 ms to count even one short message; this bound takes microseconds):
# * a token is at least one UTF-8 byte (byte-level BPE), and the JSON of a message
#   (ASCII, non-ASCII escaped as 6 or 12 characters) is at least as long as the UTF-8
#   bytes of every string in it, role and tool-call arguments included;
# * litellm adds at most 4 per message (3, and 1 for a name) and 3 for the reply;
# * its fallbacks (the four-characters-a-token estimate) are smaller still.
# Content lists (images and the like: litellm prices an image at a fixed count, whatever
# its URL's length) have no such bound: those turns are counted.
_BOUND_PER_MESSAGE = 4
_BOUND_PER_REQUEST = 3


def _messages_bound(messages: Sequence[dict[str, Any]]) -> int | None:
    """An upper bound on ``_count_messages(messages)``, or None when none is cheap."""
    if any(not isinstance(m.get("content"), str | None) for m in messages):
        return None
    try:
        size = len(json.dumps(list(messages)))
    except (TypeError, ValueError):
        return None
    return size + _BOUND_PER_MESSAGE * len(messages) + _BOUND_PER_REQUEST


def _turn_bound(turn: Turn) -> int | None:
    """An upper bound on ``_turn_tokens(turn)``, or None when none is cheap."""
    return _messages_bound(to_openai_messages(None, [turn], images=False, audio=False))


@functools.lru_cache(maxsize=256)
def _text_bound(text: str) -> int:
    """An upper bound on ``_text_tokens(text)`` (a system prompt)."""
    bound = _messages_bound(({"role": "system", "content": text},))
    return bound if bound is not None else _text_tokens(text)


def context_bound(conversation: Conversation, tool_schemas: Sequence[dict[str, Any]] = ()) -> int:
    """An upper bound on :func:`context_tokens`, tokenising only what has no cheap bound.

    Each part counts as its token count when that is already known, else as its bound
    (remembered per turn); so ``context_bound(...) >= context_tokens(...)`` always.
    """
    prompt = conversation.system_prompt
    total = _text_bound(prompt) if prompt else 0
    for turn in conversation.context_turns():
        upper = conversation.known_tokens(turn)
        if upper is None:
            upper = conversation.turn_bound(turn, _turn_bound)
        if upper is None:
            upper = conversation.turn_tokens(turn, _turn_tokens)
        total += upper
    return total + conversation.schema_tokens(tool_schemas, tools_tokens)


def context_over(
    conversation: Conversation, tool_schemas: Sequence[dict[str, Any]], limit: int
) -> int | None:
    """The context's tokens (:func:`context_tokens`) when they pass ``limit``, else None.

    Counts only when :func:`context_bound` does not already settle it: the answer, and
    so when compaction triggers, is the same as comparing the count itself.
    """
    if context_bound(conversation, tool_schemas) <= limit:
        return None
    tokens = context_tokens(conversation, tool_schemas)
    return tokens if tokens > limit else None


# ---------------------------------------------------------------- choosing the kept turns


def _starts_cleanly(turn: Turn) -> bool:
    """A turn the model's view may start at (never a tool result without its request)."""
    return not (turn.role == "user" and turn.tool_results)


def choose_start(
    conversation: Conversation, keep_last: int | None, budget: int | None
) -> int | None:
    """Index of the first turn to keep, or None when nothing would be removed.

    ``keep_last`` keeps that many turns (more if the cut would split a tool call from
    its result); otherwise the newest turns within ``budget`` tokens, starting at a
    user turn when one fits.
    """
    turns, low = conversation.turns, conversation.context_start
    n = len(turns)
    if keep_last is None and budget is None:
        keep_last = _NO_LIMIT_KEEP
    if keep_last is not None:
        start = max(low, n - keep_last)
        while low < start < n and not _starts_cleanly(turns[start]):
            start -= 1
        return start if start > low else None
    assert budget is not None
    total = 0
    best_user: int | None = None
    best_any: int | None = None
    # The latest start that keeps a tool call with its result (the fallback when not
    # even that fits: the model must still see its pending results).
    latest_clean = next((i for i in range(n - 1, low, -1) if _starts_cleanly(turns[i])), None)
    for index in range(n - 1, low, -1):
        turn = turns[index]
        total += conversation.turn_tokens(turn, _turn_tokens)
        if total > budget:
            break
        if _starts_cleanly(turn):
            best_any = index
            if turn.role == "user":
                best_user = index
    found = best_user if best_user is not None else best_any
    if found is None:
        found = latest_clean if latest_clean is not None else n
    return found if found > low else None


# ---------------------------------------------------------------- summaries


def transcript(turns: Sequence[Turn], previous: str | None, max_chars: int) -> str:
    """The removed turns as plain text for the summary request (bounded)."""
    lines: list[str] = []
    if previous:
        lines.append(f"Summary of the conversation before these turns:\n{previous}\n")
    for turn in turns:
        for content in turn.contents:
            kind = getattr(content, "type", "")
            if kind == "text":
                lines.append(f"{turn.role.capitalize()}: {content.text}")  # type: ignore[union-attr]
            elif kind == "tool_request":
                args = json.dumps(content.arguments, ensure_ascii=False)  # type: ignore[union-attr]
                lines.append(f"Assistant called {content.name}({args[:500]})")  # type: ignore[union-attr]
            elif isinstance(content, ContentToolResult):
                state = "error" if content.is_error else "result"
                output = content.output[:_TRANSCRIPT_RESULT_CHARS]
                lines.append(f"Tool {state} ({content.name}): {output}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        half = max_chars // 2
        cut = len(text) - max_chars
        text = f"{text[:half]}\n[... {cut:,} characters left out ...]\n{text[-half:]}"
    return text


def text_digest(turns: Sequence[Turn], previous: str | None, max_chars: int) -> str:
    """The plain summary used when no model can write one: the first 200 characters of
    each turn (newest kept when it would pass ``max_chars``).

    Examples:
        >>> from deputy_shiny.messages import user_turn
        >>> text_digest([user_turn("Fix the parser in src/p.py")], None, 1000)
        'user: Fix the parser in src/p.py'
    """
    lines = [previous] if previous else []
    for turn in turns:
        text = turn.text or " ".join(
            f"[{c.name}]" for c in turn.contents if isinstance(c, ContentToolResult)
        )
        text = text or " ".join(f"[call {r.name}]" for r in turn.tool_requests)
        if text:
            lines.append(f"{turn.role}: {' '.join(text.split())[:_DIGEST_CHARS]}")
    digest = "\n".join(lines)
    if len(digest) > max_chars:
        note = "[earlier lines dropped]\n"
        digest = note + digest[len(note) - max_chars :].split("\n", 1)[-1]
    return digest


def _cap(summary: str, max_chars: int) -> str:
    if len(summary) <= max_chars:
        return summary
    return summary[:max_chars] + "\n[summary cut to fit the context policy]"


# ---------------------------------------------------------------- one compaction


def _always() -> bool:
    return True


async def _no_gate() -> None:
    return None


@dataclass(frozen=True)
class CompactionServices:
    """What a compaction calls back into: the run's (automatic compaction) or the
    agent's (``agent.compact()``, outside a run).

    Attributes:
        hook_context: ``hook_context(event, **extra)`` makes the hooks' context.
        charge: Counts one summary request's usage (``(model, response, messages)``).
        may_request: Whether the budget allows one more summary request.
        admit: The host's gate before each summary attempt is sent: charged there, or
            refused (:class:`~deputy_shiny._engine.budget._RequestRefused`, which ends
            the compaction and the run: no fallback spends what the budget refused).
        emit: ``emit(cls, **fields)`` makes an event; None outside a run (no events).
        hook_events: The ``hook`` events of a hook run; None outside a run.
        guard: Awaits the summary stream, raising if the run is interrupted.
    """

    hook_context: Callable[..., HookContext]
    charge: SummaryCharge
    may_request: Callable[[], bool] = _always
    admit: Callable[[], Awaitable[None]] = _no_gate
    emit: Callable[..., Any] | None = None
    hook_events: Callable[[str, HookRun], list[Any]] | None = None
    guard: Guard[Any] = _unguarded


@dataclass
class Compactor:
    """One compaction of ``conversation`` (see the module docstring for the steps),
    calling back through ``services``."""

    conversation: Conversation
    policy: ContextPolicy
    model: ChatModel
    hooks: HookRegistry
    services: CompactionServices
    tool_schemas: Sequence[dict[str, Any]] = ()
    record: CompactionRecord | None = field(default=None, init=False)

    async def run(
        self,
        *,
        keep_last: int | None = None,
        summary: str | None = None,
        fallback: str | None = None,
        automatic: bool = False,
        tokens_before: int | None = None,
    ) -> AsyncIterator[Any]:
        """Compact, yielding events; ``self.record`` holds the outcome (None: nothing to
        remove)."""
        await load_litellm()
        conversation, policy = self.conversation, self.policy
        if tokens_before is None:
            tokens_before = context_tokens(conversation, self.tool_schemas)
        limit = policy.max_tokens
        summary_chars = 4 * max(64, int((limit or 32000) * policy.compact_to * 0.4))
        budget = None
        fixed = 0
        if limit is not None:
            fixed = _text_tokens(conversation.base_prompt) if conversation.base_prompt else 0
            fixed += tools_tokens(self.tool_schemas) + summary_chars // 4
            budget = max(0, int(limit * policy.compact_to) - fixed)
        start = choose_start(conversation, keep_last, budget)
        if start is None:
            return
        if automatic and limit is not None:
            kept = sum(
                conversation.turn_tokens(t, _turn_tokens) for t in conversation.turns[start:]
            )
            if kept + fixed - summary_chars // 4 > limit:
                # Even the newest turns alone pass max_tokens (a huge tool call or
                # result): a summary would not bring the request under it.
                logger.info("compaction skipped: the newest turns alone pass max_tokens")
                return
        removed = conversation.turns[conversation.context_start : start]
        reason = "auto" if automatic else "manual"
        for event in self._events(CompactionStartEvent, reason=reason, tokens=tokens_before):
            yield event
        # As deputy's turns_to_compact / turns_to_keep: the turns themselves (copies), so
        # a hook can write the summary; compact_count as its context's.
        details = {
            "tokens": tokens_before,
            "turns_to_remove": len(removed),
            "compact_count": len(removed),
            "turns_to_compact": [turn.model_copy(deep=True) for turn in removed],
            "turns_to_keep": [turn.model_copy(deep=True) for turn in conversation.turns[start:]],
        }
        method = "supplied"
        used_model: str | None = None
        if summary is None:
            hook_run = await self._hooks("PreCompact", reason, details)
            for event in self._hook_events("PreCompact", hook_run):
                yield event
            decided = hook_run.result
            if isinstance(decided, HookResultPreCompact):
                if not decided.continue_:
                    self._finish("cancelled", tokens_before, tokens_before, 0, automatic, None)
                    for event in self._done_events():
                        yield event
                    return
                if decided.summary is not None:
                    summary, method = decided.summary, "hook"
        if summary is None:
            previous = conversation.summary
            try:
                summary, used_model = await self._model_summary(removed, previous, limit)
                method = "model"
            except (Interrupted, asyncio.CancelledError, _RequestRefused):
                raise
            except Exception as exc:
                mode = fallback or policy.fallback
                for event in self._events(CompactionErrorEvent, error=str(exc), fallback=mode):
                    yield event
                if mode != "text":
                    raise CompactionError(
                        f"No model could write the compaction summary ({exc}). The "
                        "conversation is unchanged; use fallback='text' for a plain digest."
                    ) from exc
                summary, method = text_digest(removed, previous, summary_chars), "text"
        conversation.set_summary(_cap(summary, summary_chars), context_start=start)
        tokens_after = context_tokens(conversation, self.tool_schemas)
        self._finish(method, tokens_before, tokens_after, len(removed), automatic, used_model)
        for event in self._done_events():
            yield event
        assert self.record is not None
        post = await self._hooks("PostCompact", reason, self.record.model_dump())
        for event in self._hook_events("PostCompact", post):
            yield event

    async def _model_summary(
        self, removed: Sequence[Turn], previous: str | None, limit: int | None
    ) -> tuple[str, str]:
        text = transcript(removed, previous, max_chars=4 * (limit or 100_000))
        messages = [
            {"role": "system", "content": SUMMARY_INSTRUCTIONS},
            {"role": "user", "content": f"Summarise this conversation:\n\n{text}"},
        ]
        errors: list[str] = []
        for model in (self.model, *self.policy.summary_fallback_models):
            if not self.services.may_request():
                errors.append("the run's request limit leaves no request for a summary")
                break
            await self.services.admit()
            response = Response()
            try:
                async for _ in stream_response(
                    model, messages, [], {}, response, self.services.guard
                ):
                    pass
            except ProviderFailed as failed:
                errors.append(f"{model.model}: {failed.error}")
                continue
            finally:
                # Every attempt may be billed, a failed one too (it counts as a request).
                self.services.charge(model, response, messages)
            written = "".join(response.text).strip()
            if written:
                return written, model.model
            errors.append(f"{model.model}: the summary was empty")
        raise CompactionError("; ".join(errors) or "no model to write the summary")

    def _finish(
        self,
        method: Any,
        before: int,
        after: int,
        removed: int,
        automatic: bool,
        model: str | None,
    ) -> None:
        self.record = CompactionRecord(
            method=method,
            tokens_before=before,
            tokens_after=after,
            turns_removed=removed,
            automatic=automatic,
            model=model,
            at=time.time(),
        )
        self.conversation.last_compaction = self.record

    def _done_events(self) -> list[Any]:
        record = self.record
        assert record is not None
        return self._events(
            CompactionEvent,
            method=record.method,
            tokens_before=record.tokens_before,
            tokens_after=record.tokens_after,
            turns_removed=record.turns_removed,
        )

    def _events(self, cls: type[Any], **fields: Any) -> list[Any]:
        emit = self.services.emit
        return [] if emit is None else [emit(cls, **fields)]

    async def _hooks(self, event: str, reason: str, details: dict[str, Any]) -> HookRun:
        if not self.hooks.matchers(event):
            return HookRun(event)
        run = await self.hooks.run(
            event, context=self.services.hook_context(event, reason=reason, details=details)
        )
        if run.failure is not None:
            logger.warning("%s hook failed: %s", event, run.failure)
        return run

    def _hook_events(self, event: str, run: HookRun) -> list[Any]:
        hook_events = self.services.hook_events
        if hook_events is None or not run.records:
            return []
        return hook_events(event, run)


# ---------------------------------------------------------------- per-run capability


@dataclass(frozen=True)
class ContextRuntime:
    """What a run needs of the context policy (a field of RunDeps)."""

    policy: ContextPolicy
    store: ToolResultStore

    def is_large(self, result: ContentToolResult) -> bool:
        """True when ``result`` may be over the byte limit (then shape it in a thread)."""
        limit = self.policy.max_tool_result_bytes
        return limit is not None and not result.is_error and len(result.output) > limit // 4

    def shape_result(self, result: ContentToolResult) -> ContentToolResult:
        """A tool result as the model will see it (offloaded or cut when too large)."""
        return self.store.offload(result, self.policy.max_tool_result_bytes)

    async def compact_if_needed(
        self,
        conversation: Conversation,
        model: ChatModel,
        hooks: HookRegistry,
        tool_schemas: Sequence[dict[str, Any]],
        services: CompactionServices,
    ) -> AsyncIterator[Any]:
        """Compact when the context passes ``max_tokens``, yielding the events
        (``services``: the run's callbacks)."""
        limit = self.policy.max_tokens
        if limit is None:
            return
        await load_litellm()
        tokens = context_over(conversation, tool_schemas, limit)
        if tokens is None:
            return
        compactor = Compactor(
            conversation, self.policy, model, hooks, services, tool_schemas=tool_schemas
        )
        async for event in compactor.run(automatic=True, tokens_before=tokens):
            yield event
