"""What the kit keeps beside a saved conversation: its branches, its replies' runs.

Editing a past message keeps the conversation as it was as a branch
(:class:`~._branches.BranchTree`), and each reply's run (its id, model, tools and usage)
is what a rating records (:mod:`._feedback`). With a saved conversation both are kept
beside it, as the conversation is: in its records folder (an authenticated document,
``<kind>.json``) or in the kit's store (a record of the conversation's scope, so it goes
when the conversation is deleted or expires). A reload loads them back, so "‹ 1 / 2 ›"
still reaches an old branch, and a restored reply can still be rated with its run.

They are written only by the session that holds the conversation, after it has loaded
it (a failed restore never overwrites anything). A damaged one is logged and left out
(the conversation itself comes back all the same).

Examples:
    >>> BRANCHES_KIND, REPLIES_KIND
    ('conversation-branches', 'conversation-replies')
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..errors import DeputyError, PersistenceError, StoreUnavailableError
from ..persistence.files import read_document, write_document
from ..persistence.store import Store
from ._stored_conversations import StoredFolder

if TYPE_CHECKING:
    from ._session_conversation import SessionConversation

logger = logging.getLogger(__name__)

__all__ = ["BRANCHES_KIND", "REPLIES_KIND", "load_beside", "save_beside"]

BRANCHES_KIND = "conversation-branches"
REPLIES_KIND = "conversation-replies"


async def save_beside(conversation: SessionConversation, kind: str, payload: Any) -> None:
    """Keep ``payload`` (JSON data) as ``kind`` beside ``conversation`` (nothing unless
    this session holds it and loaded it). A failure is logged: this session keeps it."""
    if not (conversation.usable and conversation.loaded) or conversation.discarded:
        return
    folder = conversation.folder
    try:
        if isinstance(folder, StoredFolder):
            link = conversation.link
            assert link is not None

            async def put(store: Store) -> None:
                await store.put(kind, folder.name, payload, scope=folder.scope)

            await link.run(put)
        else:
            path = folder.directory / f"{kind}.json"
            await asyncio.to_thread(write_document, path, kind, payload)
    except (DeputyError, OSError) as exc:
        logger.warning("the conversation's %s could not be saved: %s", kind, exc)


async def load_beside(conversation: SessionConversation, kind: str) -> Any:
    """The ``kind`` data kept beside ``conversation``, or None (none kept, or it cannot
    be read: logged)."""
    folder = conversation.folder
    try:
        if isinstance(folder, StoredFolder):
            link = conversation.link
            assert link is not None
            record = await link.run(lambda store: store.get(kind, folder.name))
            return None if record is None else record.payload
        path = folder.directory / f"{kind}.json"
        if not await asyncio.to_thread(path.exists):
            return None
        return await asyncio.to_thread(read_document, path, kind)
    except StoreUnavailableError as exc:
        logger.warning("the conversation's %s could not be read: %s", kind, exc)
    except PersistenceError as exc:
        logger.warning("the conversation's %s are damaged; not restored: %s", kind, exc)
    return None
