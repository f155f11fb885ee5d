"""shinychat's history drawer, driven by the kit: each user's conversations in one chat.

shinychat 0.7's ``Chat(history=...)`` keeps conversations with its own controller: its
store is keyed by ``session.user`` or, for anyone else, by a token in the browser's
``localStorage`` (which any page on the same origin reads: on Posit Connect, every
content's), and it restores a conversation as a chatlas client's turns. The kit keeps
``Chat(history=False)`` and drives the same drawer itself: its browser side renders
the list the server sends (a ``history_update`` action) and sends back a conversation
picked, renamed or deleted, or "New"; the kit answers from its own list of the user's
conversations (:mod:`._session_listing`), found from the identity the kit trusts, and
restores a conversation as it restores one on reload (the page reloads to switch).
The drawer filters the list by title in the browser (its search box).

Each action runs in a task of the session's own, never in a reactive effect (Shiny has
one reactive lock for the whole process); a switch or "New" during a run asks first,
then stops the run. An id that is not one of the user's is refused and logged, and the
drawer is sent the list again (so it shows nothing that is not there).

Examples:
    >>> history_update([], None)["type"]
    'history_update'
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from shiny import reactive, ui

from ..errors import DeputyError
from ._conversation_list import ConversationEntry

if TYPE_CHECKING:
    from shinychat import Chat

    from ..agent import Agent
    from ._chat_session import _ChatSession
    from ._session_conversation import SessionConversation
    from ._strings import KitStrings

logger = logging.getLogger(__name__)

__all__ = ["history_update", "listed", "serve_history_drawer"]

STOP_WAIT = 10.0
"""Seconds a switch waits for a stopped run to end."""


def history_update(entries: list[ConversationEntry], active: str | None) -> dict[str, Any]:
    """The action that shows ``entries`` in shinychat's drawer (``active`` marked)."""
    return {
        "type": "history_update",
        "enabled": True,
        "conversations": [entry.meta() for entry in entries],
        "active_id": active,
    }


class AgentChatHandle(Protocol):
    """What the drawer uses of the chat's handle (``_chat_module.AgentChatHandle``)."""

    agent: Agent | None
    _chat_session: _ChatSession | None

    strings: KitStrings

    def running(self) -> bool: ...

    async def confirm(self, title: str, body: str, confirm_label: str) -> bool: ...

    async def new_conversation(self) -> None: ...


class _Drawer:
    """One session's drawer: what its actions use, let go of as the session ends (its
    effects stay in Shiny's session until a full garbage collection)."""

    def __init__(
        self, chat: Chat, handle: AgentChatHandle, conversation: SessionConversation
    ) -> None:
        self.chat: Chat | None = chat
        self.handle: AgentChatHandle | None = handle
        self.conversation: SessionConversation | None = conversation
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Callable[[], Awaitable[Any]], what: str) -> None:
        task = asyncio.ensure_future(self._logged(work, what))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def end(self) -> None:
        if self.conversation is not None:
            self.conversation.listing_changed = None
        self.chat = self.handle = self.conversation = None
        for task in list(self.tasks):
            task.cancel()

    async def _logged(self, work: Callable[[], Awaitable[Any]], what: str) -> None:
        if self.conversation is None:
            return
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except DeputyError as exc:
            logger.warning("the history drawer could not %s: %s", what, exc)
            ui.notification_show(f"Could not {what}: {exc}", type="error", duration=8)
        except Exception:
            logger.warning("the history drawer could not %s", what, exc_info=True)

    async def send_list(self) -> None:
        """Show the user's list in the drawer (the current conversation marked)."""
        chat, conversation = self.chat, self.conversation
        if chat is None or conversation is None:
            return
        # shinychat's private action; its browser side renders titles as text.
        await chat._send_action(await listed(conversation))  # type: ignore[arg-type]

    async def first_list(self) -> None:
        if self.conversation is not None:
            await self.conversation.ready.wait()
        await self.send_list()

    async def stopped_first(self, title: str) -> bool:
        """During a run: ask, then stop it and wait for it to end; False if declined."""
        handle = self.handle
        if handle is None or not handle.running():
            return handle is not None
        words = handle.strings
        confirmed = await handle.confirm(title, words.stop_first_body, words.stop_first_button)
        if not confirmed:
            return False
        if handle._chat_session is not None:
            handle._chat_session.stop()
        for _ in range(int(STOP_WAIT / 0.05)):
            agent = handle.agent
            if agent is None or not agent.running:
                return True
            await asyncio.sleep(0.05)
        return False

    async def switch(self, value: object) -> None:
        conversation = self.conversation
        if conversation is None or value == conversation.listing.current:
            return
        if self.handle is None or not await self.stopped_first(
            self.handle.strings.switch_confirm_title
        ):
            await self.send_list()
            return
        if self.handle is not None and self.handle._chat_session is not None:
            await self.handle._chat_session.saved()
        if not await conversation.switch_to(value):
            await self.send_list()  # not the user's: the drawer shows what is there

    async def start_new(self) -> None:
        if self.handle is not None and await self.stopped_first(
            self.handle.strings.new_confirm_title
        ):
            await self.handle.new_conversation()

    async def rename(self, value: object, title: object) -> None:
        if self.conversation is not None:
            await self.conversation.listing.rename(value, title)
        await self.send_list()

    async def delete(self, value: object) -> None:
        if self.conversation is not None:
            await self.conversation.delete(value)
        await self.send_list()


async def listed(conversation: SessionConversation) -> dict[str, Any]:
    """The drawer's ``history_update`` for ``conversation``'s user: their list, the
    current conversation marked (the edit control sends it too, so it never blanks it)."""
    listing = await conversation.listing.read()
    current = conversation.listing.current
    active = current if listing.find(current) is not None else None
    return history_update(listing.entries, active)


def serve_history_drawer(
    input: Any,
    session: Any,
    chat: Chat,
    handle: AgentChatHandle,
    conversation: SessionConversation | None,
) -> None:
    """Serve the drawer of ``chat`` (whose handle is ``handle``) from the user's list
    (nothing without a saved conversation)."""
    if conversation is None:
        return
    drawer = _Drawer(chat, handle, conversation)
    conversation.listing_changed = drawer.send_list
    # The drawer's button shows only on a chat whose drawer is served (the edit control
    # turns shinychat's history on without one): see deputy_shiny.css.
    show_button = lambda: session.send_custom_message("deputy-drawer", {"id": chat.id})  # noqa: E731
    drawer.spawn(show_button, "show the drawer's button")
    drawer.spawn(drawer.first_list, "show the conversations")

    def payload(name: str) -> dict[str, Any] | None:
        # No ignore_init (an input the browser never set would never fire): the first
        # run reads nothing (a silent exception) and does nothing.
        value = input[name]()
        return value if isinstance(value, dict) else None

    @reactive.effect
    @reactive.event(input.chat_history_select)
    def _select() -> None:
        value = payload("chat_history_select")
        if value is not None:
            drawer.spawn(lambda: drawer.switch(value.get("id")), "open the conversation")

    @reactive.effect
    @reactive.event(input.chat_history_new)
    def _new() -> None:
        if input.chat_history_new():
            drawer.spawn(drawer.start_new, "start a new conversation")

    @reactive.effect
    @reactive.event(input.chat_history_rename)
    def _rename() -> None:
        value = payload("chat_history_rename")
        if value is not None:
            work = lambda: drawer.rename(value.get("id"), value.get("title"))  # noqa: E731
            drawer.spawn(work, "rename the conversation")

    @reactive.effect
    @reactive.event(input.chat_history_delete)
    def _delete() -> None:
        value = payload("chat_history_delete")
        if value is not None:
            drawer.spawn(lambda: drawer.delete(value.get("id")), "delete the conversation")

    session.on_ended(drawer.end)
