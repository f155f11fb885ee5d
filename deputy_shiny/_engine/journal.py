"""What the engine knows of the run journal: the steps it writes, and a run it replays.

With a journal (``RunDeps.journal``: an agent with a ``store``), every step of a run is
recorded as it happens and written to the store in batches, in order (at the waits
below, else within :attr:`RunJournal.partial_interval` seconds), so another
process can resume the run if this one dies (:mod:`deputy_shiny.persistence.run_journal`
implements both sides). The run waits for the store only before a tool runs (its start,
and so every step before it, is written first), before each model request (the results
so far are written) and at its end. The engine records:

* ``turn``: each turn as it joins the conversation: the user's message accepted, each
  model response once complete (text, tool calls, usage), each results turn;
* ``decision``: a call allowed (by policy, hooks or a person), with the arguments it
  runs with; ``tool_start`` right before the tool runs (waited for: a crash after it
  means the tool may have run); ``tool_end`` with its result (ran, refused or denied);
* ``compaction``: the conversation's view after a compaction;
* ``approval``: the call the run paused on for a durable approval;
* the run's end (its stop reason).

Every step carries the run's usage so far. Streamed text is not journaled chunk by
chunk: the response being streamed is saved at most every
:attr:`RunJournal.partial_interval` seconds, in the background. A :class:`Replay` is a
journaled run being resumed (``RunOptions.replay``): its conversation rebuilt, its
usage so far, and what became of the open response's tool calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..conversation import Conversation
from ..messages import ContentToolResult
from ..usage import AgentUsage, UsageLimits

logger = logging.getLogger(__name__)

__all__ = [
    "INTERRUPTED",
    "JournalOpener",
    "Replay",
    "RunJournal",
    "end_journal",
    "open_journal",
]

INTERRUPTED = (
    "Interrupted: the process running this tool call ended while it ran, so it may or may "
    "not have taken effect. Check before calling it again."
)
"""What the model is told of a non-idempotent call that was running when its process died."""


class RunJournal(Protocol):
    """One run's journal, open (its store record says the run is live)."""

    partial_interval: float
    """Seconds between two saves of the text being streamed."""

    def record(self, kind: str, data: Mapping[str, Any], usage: AgentUsage) -> None:
        """Queue a step (written in order, in the background)."""
        ...

    async def flush(self) -> None:
        """Wait until every queued step is written (raises when one could not be)."""
        ...

    def save_partial(self, text: str) -> None:
        """Save the text streamed so far, in the background (a save in flight: skipped)."""
        ...

    async def end(self, stop_reason: str) -> None:
        """The run ended: write the rest, record how, let the run's lease go."""
        ...

    def abandon(self, stop_reason: str) -> None:
        """As :meth:`end`, without waiting (the run's consumer walked away)."""
        ...


class JournalOpener(Protocol):
    """Opens a new run's journal (``RunDeps.journal``)."""

    async def open(
        self,
        run_id: str,
        conversation: Conversation,
        run_context: Mapping[str, Any],
        limits: UsageLimits,
    ) -> RunJournal:
        """Record the run as live (the conversation before it is its base). Raises when
        the store cannot record it: the run does not start then."""
        ...


@dataclass
class Replay:
    """A journaled run being resumed (``RunOptions.replay``), already claimed.

    Attributes:
        run_id: The run's id (the resumed run keeps it).
        journal: Its journal, open again (the resumed run writes on).
        prior_usage: Its usage when it was interrupted.
        turn_number: Its model turns so far.
        results: Results of the open response's calls that ended (replayed, not run).
        started: Calls that started and did not end (interrupted, unless idempotent).
        allowed: Calls decided allowed that had not started, with their arguments (run
            without asking again: each call is decided once).
    """

    run_id: str
    journal: RunJournal
    prior_usage: AgentUsage
    turn_number: int = 0
    results: dict[str, ContentToolResult] = field(default_factory=dict)
    started: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowed: dict[str, dict[str, Any]] = field(default_factory=dict)


async def open_journal(
    opener: JournalOpener | None,
    replay: Replay | None,
    *,
    delegated: bool,
    run_id: str,
    conversation: Conversation,
    run_context: Mapping[str, Any],
    limits: UsageLimits,
) -> tuple[RunJournal | None, Exception | None]:
    """A run's journal (a replayed run's is open already; None: not journaled), and why
    it could not be opened. A delegated run is not journaled: its lead's call of it is
    (a lead resumed after a crash is told that call was interrupted). A run whose journal
    cannot be opened runs unjournaled: nothing of it is in the store, so nothing can
    resume it twice, and a chat stays usable while its store is down.
    """
    if replay is not None:
        return replay.journal, None
    if opener is None or delegated:
        return None, None
    try:
        return await opener.open(run_id, conversation, run_context, limits), None
    except Exception as exc:
        logger.warning("The run %s could not be journaled", run_id, exc_info=True)
        return None, exc


async def end_journal(journal: RunJournal | None, stop_reason: str | None) -> None:
    """Record the run's end (a failure is logged: the run is over either way)."""
    if journal is None:
        return
    try:
        await journal.end(stop_reason or "interrupted")
    except Exception:
        logger.warning("The end of a journaled run was not written", exc_info=True)
