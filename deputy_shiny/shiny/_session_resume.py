"""A reply whose server died, picked up by the session that opens its conversation.

With ``KitPersistence(store=...)`` every run of a session's agent is journaled in the
store (:mod:`deputy_shiny.persistence.run_journal`). When the process streaming a reply
dies (a redeploy, the OOM killer, a crash), the user's reconnect (a reload, or the
proxy routing the browser to another process) opens the conversation in a new session.
That session finds the run (:func:`find_run`), shows what the journal holds of it (the
user's message, the finished responses and their tool cards), waits until the dead
process's lease on the run lapses, and resumes it (:class:`ResumedRun`): the rest of
the reply streams live into the same chat message. A tool call that ended is replayed
from the journal, never run again; one that was running gets an "interrupted" result
(see the guide's "Interrupted runs").

Stop during the wait ends the run: it is resumed once claimable and interrupted as it
starts (so the conversation keeps what the journal held, as a stopped reply's does). A
message sent meanwhile gets the busy note, as during any reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING

from ..errors import DeputyError
from ..events import AgentEvent, StartEvent
from ..persistence import run_journal
from ..persistence.run_journal import InterruptedRun
from ._render import note_chunk
from ._strings import KitStrings
from ._transcript import Chunk, TranscriptMessage, transcript_messages

if TYPE_CHECKING:
    from ..agent import Agent

logger = logging.getLogger(__name__)

__all__ = ["POLL_SECONDS", "ResumedRun", "find_run"]

POLL_SECONDS = 0.5
"""How often a session waiting for a dead process's lease on a run reads the store."""


async def find_run(agent: Agent) -> InterruptedRun | None:
    """The agent's run that is journaled as in progress (its lease lapsed, or still held
    by a process that may have just died), or None: no store, none, or the store
    cannot be read (logged: the conversation opens as saved)."""
    if agent.store is None:
        return None
    try:
        return await agent.interrupted_run_async(include_held=True)
    except DeputyError as exc:
        logger.warning("the run journal could not be read: %s", exc)
        return None


class ResumedRun:
    """One interrupted run being picked up in a session.

    Args:
        agent: The session's agent (its conversation is the one the run started from).
        run: The run, as :func:`find_run` found it.
        image_origins: Origins images in model text may load from.
        strings: The words of the notes.

    Attributes:
        before: The messages to show before the reply (the run's user message).
        lead: The reply's first chunks: what the journal holds of it.

    Examples:
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.messages import ContentText, Turn
        >>> from deputy_shiny.shiny._strings import DEFAULT_STRINGS
        >>> from deputy_shiny.testing import ScriptedModel
        >>> run = InterruptedRun(run_id="run_1", turns=[
        ...     Turn(role="user", contents=[ContentText(text="Go")]),
        ...     Turn(role="assistant", contents=[ContentText(text="Working on it.")])])
        >>> agent = Agent(ScriptedModel([]))
        >>> resumed = ResumedRun(agent, run, (), DEFAULT_STRINGS)
        >>> [m.role for m in resumed.before], resumed.lead
        (['user'], ['Working on it.'])
    """

    def __init__(
        self,
        agent: Agent,
        run: InterruptedRun,
        image_origins: Iterable[str],
        strings: KitStrings,
    ) -> None:
        self.agent = agent
        self.run = run
        self.strings = strings
        messages = transcript_messages(run.turns, image_origins)
        self.lead: list[Chunk] = []
        if messages and messages[-1].role == "assistant":
            self.lead = messages.pop().chunks
        self.before: list[TranscriptMessage] = messages
        self.ready = False  # prepare() found it claimable

    async def prepare(self, ended: Callable[[], bool]) -> AsyncIterator[str]:
        """Wait until the run can be claimed (its lease lapsed), yielding the notes the
        reply shows meanwhile; then :meth:`events` resumes it (``ready``). A session
        that ``ended`` meanwhile leaves it to the next one."""
        run: InterruptedRun | None = self.run
        if run is not None and run.held:
            yield note_chunk(self.strings.run_resuming)
        # A lease lapses within LEASE_TTL of its last renewal; one held longer belongs to
        # a live process (it ends the run itself when its session learns it lost the
        # conversation).
        deadline = time.monotonic() + 2 * run_journal.LEASE_TTL
        while run is not None and run.held:
            if time.monotonic() > deadline:
                yield note_chunk(self.strings.run_still_held)
                return
            await asyncio.sleep(POLL_SECONDS)
            if ended():
                return
            run = await _same_run(self.agent, self.run.run_id)
        if run is None:
            yield note_chunk(self.strings.run_ended_elsewhere)
            return
        self.ready = True

    async def events(self, stopped: Callable[[], bool]) -> AsyncIterator[AgentEvent]:
        """The resumed run's events (after :meth:`prepare` found it claimable); the user
        ``stopped`` it meanwhile: it is interrupted as it starts."""
        assert self.ready
        async for event in self.agent.resume_run_events(self.run.run_id):
            if isinstance(event, StartEvent) and stopped():
                # Stopped during the wait: it ends at once, keeping what was journaled.
                self.agent.interrupt("interrupted")
            yield event


async def _same_run(agent: Agent, run_id: str) -> InterruptedRun | None:
    """The run ``run_id`` as the store has it now (None: it ended, or cannot be read)."""
    run = await find_run(agent)
    return run if run is not None and run.run_id == run_id else None
