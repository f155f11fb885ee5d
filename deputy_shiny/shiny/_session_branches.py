"""Edit a past message: the conversation branches there, and the files go back with it.

shinychat (0.7) lets the user edit a past message and step between its versions ("‹ 1 / 2
›"), as ``{chat}_message_edit`` (``{"index", "content"}``) and ``{chat}_message_navigate``
(``{"index", "direction"}``) inputs; its own handling needs its history controller and a
chatlas client. The kit answers them itself, against the agent (:class:`SessionBranches`):

* An edit stops a run in progress first (its waiting approvals are denied as "Stop the
  run" denies them, so none of the abandoned branch's calls ever runs). With file
  checkpoints on, a confirm lists the files that go back ("3 files restored: a.md, ...");
  the conversation is kept as a :class:`~._branches.Branch` (its turns, its checkpoint
  journal, the contents of the files the journal covers), the agent's turns are cut before
  the message, the files are rewound to the checkpoint its run made as it started (the
  workspace is as it was when the message was first sent), and the new text runs.
* "‹" / "›" switch to a stored branch the same way: the files the current branch changed
  since that message go back, then the other branch's files, journal and turns come back.

Usage is the agent's, over every run: a branch never resets it, and the budget was charged
for each request as it was sent. The message index comes from the browser, so it is
untrusted: it must name a user message of this session's chat that the agent has as a
prompt, else the edit is refused (logged; nothing changes). The branches live as long as
the session, and with a saved conversation they are kept with it
(:mod:`._kept_beside`): after a reload the old branches are still reachable.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from shiny import reactive
from shinychat import Chat

from ..errors import DeputyError
from ..messages import Turn
from ..persistence.checkpoints import USER_TURN_KEY, FileJournal
from ._branches import BranchTree, prompt_indices
from ._chat_session import BUSY_MESSAGE, _ChatSession, tell
from ._history_drawer import listed
from ._image_guard import ImageGuard
from ._kept_beside import BRANCHES_KIND, load_beside, save_beside
from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = ["SessionBranches", "files_restored", "parse_edit", "parse_navigate"]

logger = logging.getLogger(__name__)

MAX_EDIT_CHARS = 100_000
"""The longest edited message accepted (a longer one is refused with a note)."""
SETTLE_POLLS = 200  # x 0.05 s: how long an edit waits for the stopped run to end
SHOWN_FILES = 5

Send = Callable[[dict[str, Any]], Awaitable[None]]


def files_restored(paths: Sequence[str], strings: KitStrings = DEFAULT_STRINGS) -> str:
    """The confirm's words for the files that go back.

    Examples:
        >>> files_restored(["notes/a.md"])
        '1 file restored: notes/a.md'
        >>> files_restored([f"f{i}" for i in range(7)])
        '7 files restored: f0, f1, f2, f3, f4 and 2 more'
    """
    names = ", ".join(paths[:SHOWN_FILES])
    if len(paths) > SHOWN_FILES:
        names += strings.format("files_more", count=len(paths) - SHOWN_FILES)
    if len(paths) == 1:
        return strings.format("files_restored_one", names=names)
    return strings.format("files_restored_many", count=len(paths), names=names)


def parse_edit(value: Any) -> tuple[int, str] | None:
    """An edit input's ``(index, content)``, or None when it is not one shinychat sends.

    Examples:
        >>> parse_edit({"index": 2, "content": "again", "attachments": []})
        (2, 'again')
        >>> parse_edit({"index": "2", "content": "x"}), parse_edit({"index": True, "content": "x"})
        (None, None)
    """
    if not isinstance(value, Mapping):
        return None
    index, content = value.get("index"), value.get("content")
    if isinstance(index, bool) or not isinstance(index, int) or not isinstance(content, str):
        return None
    return index, content


def parse_navigate(value: Any) -> tuple[int, Literal["prev", "next"]] | None:
    """A navigation input's ``(index, direction)``, or None.

    Examples:
        >>> parse_navigate({"index": 0, "direction": "next"}), parse_navigate({"index": 0})
        ((0, 'next'), None)
    """
    if not isinstance(value, Mapping):
        return None
    index, direction = value.get("index"), value.get("direction")
    if isinstance(index, bool) or not isinstance(index, int):
        return None
    if direction == "prev":
        return index, "prev"
    if direction == "next":
        return index, "next"
    return None


def _checkpoint_for(journal: FileJournal, turn: int) -> str | None:
    """The checkpoint the run of the prompt at ``turn`` made as it started (the last
    one, should the message have been edited before)."""
    found = None
    for checkpoint in journal.list_checkpoints():
        if checkpoint.run_id is not None and checkpoint.metadata.get(USER_TURN_KEY) == turn:
            found = checkpoint.id
    return found


def _journal_paths(state: Mapping[str, Any] | None) -> tuple[str, ...]:
    if state is None:
        return ()
    return tuple(sorted({change["path"] for change in state.get("changes", ())}))


class SessionBranches:
    """One session's branches and its answers to shinychat's edit and navigation inputs.

    Args:
        session: The session's chat (its agent, runs, prompts and replay).
        chat: Its shinychat ``Chat`` (the messages the browser shows).
        send: Sends a shinychat action to the browser (``{"type": ...}``).
    """

    def __init__(self, session: _ChatSession, chat: Chat, send: Send) -> None:
        self.session = session
        self.chat = chat
        self._send = send
        self.tree = BranchTree()
        self.switching = False
        self.tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ plumbing

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` in a task of the session's (confirms wait for the user: never in
        a reactive effect, which holds the process's one lock)."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        """The session ended: its edits in progress stop."""
        for task in list(self.tasks):
            task.cancel()

    async def enable(self) -> None:
        """Show shinychat's edit buttons: it shows them while its history is on, so this
        sends its history (:attr:`history`), which also ends a navigation it waits on."""
        await self._send(await self.history())

    async def start(self) -> None:
        """As the session starts: :meth:`enable`, then, once the saved conversation is
        back, its branches (each message's versions marked again)."""
        await self.enable()
        conversation = self.session.conversation
        if conversation is None:
            return
        await conversation.ready.wait()
        data = await load_beside(conversation, BRANCHES_KIND) if conversation.loaded else None
        if data is None or self.tree.stored:
            return
        try:
            self.tree = await asyncio.to_thread(BranchTree.from_payload, data)
        except DeputyError as exc:
            logger.warning("a conversation's branches are damaged; not restored: %s", exc)
            return
        await self.send_siblings()

    async def _keep_tree(self) -> None:
        if self.session.conversation is not None:
            payload = await asyncio.to_thread(self.tree.payload)
            await save_beside(self.session.conversation, BRANCHES_KIND, payload)

    async def history(self) -> dict[str, Any]:
        """The ``history_update`` action :meth:`enable` sends: the user's conversations
        when they are saved (the drawer's list, never blanked), else none."""
        conversation = self.session.conversation
        if conversation is not None:
            return await listed(conversation)
        return {"type": "history_update", "enabled": True, "conversations": [], "active_id": None}

    def _busy(self) -> bool:
        s = self.session
        return bool(s.agent.running or s.streams or s.starting)

    # ------------------------------------------------------------------ messages

    def _aligned(self) -> dict[int, int]:
        """``{chat message index: prompt number}`` for the chat's user messages that the
        agent has as prompts (in order; a message refused before it ran has none)."""
        with reactive.isolate():
            shown = self.chat.messages()
        turns = self.session.agent.get_turns()
        prompts = [turns[i].text for i in prompt_indices(turns)]
        aligned: dict[int, int] = {}
        for index, message in enumerate(shown):
            if message.get("role") != "user" or len(aligned) >= len(prompts):
                continue
            text = prompts[len(aligned)]
            if message.get("content") in (text, self._as_shown(text)):
                aligned[index] = len(aligned)
        return aligned

    def _as_shown(self, text: str) -> str:
        guard = ImageGuard(self.session.image_origins)
        return guard.feed(text) + guard.flush()

    async def _ordinal(self, index: int) -> int | None:
        """The prompt number of chat message ``index``; None (logged, and said when it is a
        user message the agent never got) when it names no prompt of this chat."""
        with reactive.isolate():
            shown = self.chat.messages()
        ordinal = self._aligned().get(index)
        if ordinal is None:
            logger.warning("an edit or navigation naming message %r was refused", index)
            if 0 <= index < len(shown) and shown[index].get("role") == "user":
                await tell(self.chat, self.session.strings.not_editable)
        return ordinal

    async def _show(self) -> None:
        """The chat shows the agent's conversation again, then each message's versions."""
        await self.chat.clear_messages()
        await self.session.replay(None)
        await self.send_siblings()

    async def send_siblings(self) -> None:
        """Mark the user messages that have other versions ("‹ 2 / 3 ›")."""
        ordinals = {o: i for i, o in self._aligned().items()}
        siblings = self.tree.siblings(self.session.agent.get_turns())
        data = {
            str(ordinals[o]): {"index": at, "total": count}
            for o, (at, count) in siblings.items()
            if o in ordinals
        }
        if data:
            await self._send({"type": "update_siblings", "data": data})

    async def _settle(self) -> None:
        """Stop a run in progress (its waiting approvals are denied, never run) and wait
        for its stream to end."""
        if not self._busy():
            return
        self.session.stop()
        for _ in range(SETTLE_POLLS):
            if not self._busy():
                return
            await asyncio.sleep(0.05)
        raise DeputyError("the run did not stop in time")

    async def _go_ahead(
        self, turns: list[Turn], paths: Sequence[str], title: str, body: str, label: str
    ) -> bool:
        """Whether to switch: confirmed when files go back (``paths``), and the
        conversation still ``turns`` with no run (none was sent while the confirm waited:
        else the chat says it is busy, and nothing changes)."""
        if paths and not await self.session.prompts.confirm(
            title, body, label, self.session.strings
        ):
            return False
        if self._busy() or self.session.agent.get_turns() != turns:
            await tell(self.chat, BUSY_MESSAGE)
            return False
        return True

    async def _refresh(self) -> None:
        s = self.session
        await s.saved()
        await self._keep_tree()
        s.ended_calls += 1  # views of the workspace refresh, as after a tool call
        await s.values.set_tool_events(s.ended_calls)

    async def _checkpoint(self, turn: int) -> str | None:
        journal = self.session.agent.file_checkpoints
        if journal is None:
            return None
        return await asyncio.to_thread(_checkpoint_for, journal, turn)

    async def _snapshot(self) -> tuple[dict[str, Any] | None, dict[str, bytes | None]]:
        """The current branch's journal, and its files as they are now (read before
        anything changes: a file that cannot be kept refuses the switch)."""
        journal = self.session.agent.file_checkpoints
        if journal is None:
            return None, {}
        state = await asyncio.to_thread(journal.checkpoint_state)
        files = await asyncio.to_thread(journal.read_files, _journal_paths(state))
        return state, files

    async def _alone(self, work: Awaitable[None], failed: str) -> None:
        """Run an edit or a switch, one at a time; a refusal is logged and said."""
        self.switching = True
        try:
            await work
        except DeputyError as exc:
            logger.warning("%s: %s", failed, exc)
            await tell(self.chat, f"{failed}: {exc}")
        except Exception as exc:  # e.g. the browser left mid-way: logged, never lost
            logger.warning("%s", failed, exc_info=True)
            await tell(self.chat, f"{failed} ({type(exc).__name__}).")
        finally:
            self.switching = False

    # ------------------------------------------------------------------ edit

    async def edit(self, index: int, content: str, *, attachments: bool = False) -> None:
        """The user edited chat message ``index`` to ``content`` (``attachments``: with
        files attached, which are not sent again: the chat says so)."""
        if self.switching:
            await tell(self.chat, BUSY_MESSAGE)
            return
        if not content.strip() or len(content) > MAX_EDIT_CHARS:
            limit = f"{MAX_EDIT_CHARS:,}"
            await tell(self.chat, self.session.strings.format("edit_length", limit=limit))
            return
        await self._alone(self._edit(index, content, attachments), self.session.strings.edit_failed)

    async def _edit(self, index: int, content: str, attachments: bool) -> None:
        await self._settle()
        ordinal = await self._ordinal(index)
        if ordinal is None:
            return
        agent = self.session.agent
        turns = agent.get_turns()
        cut = prompt_indices(turns)[ordinal]
        journal = agent.file_checkpoints
        checkpoint = await self._checkpoint(cut)
        paths: tuple[str, ...] = ()
        if journal is not None and checkpoint is not None:
            paths = await asyncio.to_thread(journal.changed_since, checkpoint)
        words = self.session.strings
        body = words.format("edit_body", files=files_restored(paths, words))
        if not await self._go_ahead(turns, paths, words.edit_title, body, words.edit_button):
            return
        state, files = await self._snapshot()
        self.tree.keep(turns, state, files)
        await self._keep_tree()  # a reload during the edited message's run keeps it too
        agent.set_turns(turns[:cut])
        if checkpoint is not None:
            await asyncio.to_thread(agent.rewind_files, checkpoint)
        await self._show()
        if journal is not None and checkpoint is None:
            await tell(self.chat, words.edit_no_checkpoint)
        if attachments:
            await tell(self.chat, words.edit_no_attachments)
        await self.session.send(content)
        await self._after_run()

    async def _after_run(self) -> None:
        """Once the edited message's run ends: saved, and its versions marked."""
        for _ in itertools.count():  # polled by a task of the session's, cancelled at its end
            if not self._busy():
                break
            await asyncio.sleep(0.05)
        await self._refresh()
        await self.send_siblings()

    # ------------------------------------------------------------------ navigate

    async def navigate(self, index: int, direction: Literal["prev", "next"]) -> None:
        """The user pressed "‹" or "›" on chat message ``index``."""
        try:
            if self.switching or self._busy():
                await tell(self.chat, BUSY_MESSAGE)
                return
            await self._alone(self._navigate(index, direction), self.session.strings.version_failed)
        finally:
            await self.enable()  # shinychat waits for it to end the navigation

    async def _navigate(self, index: int, direction: Literal["prev", "next"]) -> None:
        ordinal = await self._ordinal(index)
        if ordinal is None:
            return
        agent = self.session.agent
        turns = agent.get_turns()
        target = self.tree.pick(turns, ordinal, direction)
        if target is None:
            return
        journal = agent.file_checkpoints
        cut = prompt_indices(turns)[ordinal]
        checkpoint = await self._checkpoint(cut)
        paths: set[str] = set()
        if journal is not None:
            if checkpoint is not None:
                paths.update(await asyncio.to_thread(journal.changed_since, checkpoint))
            now = await asyncio.to_thread(journal.read_files, tuple(target.files))
            paths.update(p for p, data in target.files.items() if now[p] != data)
        words = self.session.strings
        body = words.format("version_body", files=files_restored(sorted(paths), words))
        if not await self._go_ahead(
            turns, sorted(paths), words.version_title, body, words.version_button
        ):
            return
        state, files = await self._snapshot()
        self.tree.take(target)
        self.tree.keep(turns, state, files, next_id=target.id)
        if journal is not None:
            if checkpoint is not None:
                await asyncio.to_thread(agent.rewind_files, checkpoint)
            await asyncio.to_thread(journal.write_files, target.files)
            if target.journal is not None:
                await asyncio.to_thread(journal.restore_checkpoint_state, target.journal)
        agent.set_turns(target.turns)
        await self._refresh()
        await self._show()


def bind_branches(input: Any, branches: Callable[[], SessionBranches | None]) -> None:
    """The chat's edit and navigation inputs reach ``branches()`` (None once the session
    has ended), each in a task of its own."""

    @reactive.effect
    @reactive.event(input.chat_message_edit)  # no ignore_init: see _prompts.session_prompts
    def _edit() -> None:
        value = input.chat_message_edit()
        target, parsed = branches(), parse_edit(value)
        if parsed is None:
            logger.warning("a malformed edit input was refused")
        elif target is not None:
            attached = bool(value.get("attachments"))  # a mapping: parse_edit checked
            target.spawn(target.edit(*parsed, attachments=attached))

    @reactive.effect
    @reactive.event(input.chat_message_navigate)
    def _navigate() -> None:
        target, parsed = branches(), parse_navigate(input.chat_message_navigate())
        if target is None:
            return
        if parsed is None:
            logger.warning("a malformed navigation input was refused")
            target.spawn(target.enable())  # shinychat waits for it to end the navigation
        else:
            target.spawn(target.navigate(*parsed))
