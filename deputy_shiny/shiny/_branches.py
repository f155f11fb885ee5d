"""A conversation's branches: what editing a past message leaves behind, kept to go back to.

Editing the user's k-th message (a *prompt*: a user turn with text) cuts the agent's
conversation before it and runs the new text; the conversation as it was becomes a
stored :class:`Branch` (its turns, its file checkpoint journal and the contents of the
files that journal covers), so shinychat's "‹ 1 / 2 ›" navigation can go back to it.

Branches are compared by *exchanges* (a prompt and every turn up to the next one): two
branches that share their first k exchanges and differ in the next are versions of
message k. So the tree needs no ids of its own, and a version is never lost, also when
two edits sent the same text (their replies differ). Pure logic, no Shiny: the session's
side is :mod:`._session_branches`.

Examples:
    >>> from deputy_shiny.messages import ContentText, Turn
    >>> def t(role, text):
    ...     return Turn(role=role, contents=[ContentText(text=text)])
    >>> old = [t("user", "hi"), t("assistant", "hello"), t("user", "a"), t("assistant", "A")]
    >>> new = [t("user", "hi"), t("assistant", "hello"), t("user", "b"), t("assistant", "B")]
    >>> tree = BranchTree()
    >>> tree.keep(old, None, {})
    >>> tree.siblings(new)
    {1: (1, 2)}
    >>> [turn.text for turn in tree.pick(new, 1, "prev").turns]
    ['hi', 'hello', 'a', 'A']
"""

from __future__ import annotations

import base64
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import PersistenceCorruptError
from ..messages import ContentText, ContentToolResult, Turn

__all__ = ["MAX_BRANCHES", "Branch", "BranchTree", "exchanges", "prompt_indices"]

logger = logging.getLogger(__name__)

MAX_BRANCHES = 20
"""Branches kept per conversation besides the current one; past it the least recently
seen goes (and the log says so)."""


@dataclass(frozen=True)
class Branch:
    """One stored version of the conversation.

    Attributes:
        id: Its number in the order branches were made (the first is 0).
        turns: The agent's turns as the branch left them.
        journal: The file checkpoint journal's state then (``checkpoint_state()``), or
            None with checkpoints off.
        files: The contents then of every file the journal covers (None: absent).
        seen: When it was last the current branch (a counter: higher is later).
    """

    id: int
    turns: tuple[Turn, ...]
    journal: dict[str, Any] | None = None
    files: dict[str, bytes | None] = field(default_factory=dict)
    seen: int = 0


def _is_prompt(turn: Turn) -> bool:
    return (
        turn.role == "user"
        and not any(isinstance(c, ContentToolResult) for c in turn.contents)
        and any(isinstance(c, ContentText) and c.text for c in turn.contents)
    )


def prompt_indices(turns: Sequence[Turn]) -> list[int]:
    """The indices of the user's prompts among ``turns`` (not tool results)."""
    return [index for index, turn in enumerate(turns) if _is_prompt(turn)]


def exchanges(turns: Sequence[Turn]) -> list[tuple[Turn, ...]]:
    """``turns`` cut at each prompt: one tuple per prompt, up to the next one (turns
    before the first prompt, if any, go with it)."""
    starts = prompt_indices(turns)
    if not starts:
        return []
    bounds = [0, *starts[1:], len(turns)]
    return [tuple(turns[a:b]) for a, b in itertools.pairwise(bounds)]


class BranchTree:
    """The stored branches of one conversation, and the current branch's number.

    Args:
        limit: Branches kept besides the current one.
    """

    def __init__(self, limit: int = MAX_BRANCHES) -> None:
        self.limit = limit
        self.stored: list[Branch] = []
        self.current_id = 0
        self._made = 1  # branch numbers handed out (the current one is 0)
        self._clock = 0

    def keep(
        self,
        turns: Sequence[Turn],
        journal: dict[str, Any] | None,
        files: dict[str, bytes | None],
        *,
        next_id: int | None = None,
    ) -> None:
        """Store the current branch as it is now; the current one becomes ``next_id``
        (a stored branch being switched to), or a new branch (an edit)."""
        self._clock += 1
        self.stored.append(Branch(self.current_id, tuple(turns), journal, files, self._clock))
        if next_id is None:
            next_id, self._made = self._made, self._made + 1
        self.current_id = next_id
        while len(self.stored) > self.limit:
            dropped = min(self.stored, key=lambda branch: branch.seen)
            self.stored.remove(dropped)
            logger.info("a conversation branch was dropped: over %d kept", self.limit)

    def payload(self) -> dict[str, Any]:
        """The tree as JSON data (file contents in base64), for :meth:`from_payload`."""
        return {
            "current_id": self.current_id,
            "made": self._made,
            "clock": self._clock,
            "stored": [
                {
                    "id": branch.id,
                    "turns": [turn.model_dump(mode="json") for turn in branch.turns],
                    "journal": branch.journal,
                    "files": {
                        path: None if data is None else base64.b64encode(data).decode()
                        for path, data in branch.files.items()
                    },
                    "seen": branch.seen,
                }
                for branch in self.stored
            ],
        }

    @classmethod
    def from_payload(cls, data: Any, limit: int = MAX_BRANCHES) -> BranchTree:
        """The tree :meth:`payload` made.

        Raises:
            PersistenceCorruptError: ``data`` is not such a tree.
        """
        try:
            tree = cls(limit)
            tree.current_id, tree._made = int(data["current_id"]), int(data["made"])
            tree._clock = int(data["clock"])
            for item in data["stored"][:limit]:
                journal = item["journal"]
                if journal is not None and not isinstance(journal, dict):
                    raise TypeError("a branch's journal is not a mapping")
                files = {
                    str(path): None if text is None else base64.b64decode(text, validate=True)
                    for path, text in item["files"].items()
                }
                turns = tuple(Turn.model_validate(turn) for turn in item["turns"])
                tree.stored.append(
                    Branch(int(item["id"]), turns, journal, files, int(item["seen"]))
                )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PersistenceCorruptError(f"saved branches are not valid ({exc})") from None
        return tree

    def take(self, branch: Branch) -> None:
        """``branch`` becomes the current one: it leaves the store."""
        self.stored.remove(branch)

    def _versions(self, current: Sequence[Turn], ordinal: int) -> list[list[Branch | None]]:
        """The versions of prompt ``ordinal`` after ``current``'s first exchanges, in the
        order they were made; each is a list of branches (None: the current one)."""
        mine = exchanges(current)
        groups: list[tuple[tuple[Turn, ...], list[Branch | None], int]] = []
        candidates: list[tuple[list[tuple[Turn, ...]], Branch | None, int]] = [
            (mine, None, self.current_id)
        ]
        candidates += [(exchanges(b.turns), b, b.id) for b in self.stored]
        for parts, branch, number in candidates:
            if len(parts) <= ordinal or parts[:ordinal] != mine[:ordinal]:
                continue
            for index, (key, members, first) in enumerate(groups):
                if key == parts[ordinal]:
                    members.append(branch)
                    groups[index] = (key, members, min(first, number))
                    break
            else:
                groups.append((parts[ordinal], [branch], number))
        groups.sort(key=lambda group: group[2])
        return [members for _key, members, _first in groups]

    def siblings(self, current: Sequence[Turn]) -> dict[int, tuple[int, int]]:
        """``{ordinal: (position, count)}`` for each of ``current``'s prompts that has
        other versions: where the current one is among them, and how many there are."""
        found: dict[int, tuple[int, int]] = {}
        if not self.stored:
            return found
        for ordinal in range(len(exchanges(current))):
            versions = self._versions(current, ordinal)
            if len(versions) > 1:
                position = next(i for i, members in enumerate(versions) if None in members)
                found[ordinal] = (position, len(versions))
        return found

    def pick(
        self, current: Sequence[Turn], ordinal: int, direction: Literal["prev", "next"]
    ) -> Branch | None:
        """The branch "‹" or "›" on prompt ``ordinal`` goes to (of that version, the one
        seen last), or None at either end."""
        versions = self._versions(current, ordinal)
        here = next((i for i, members in enumerate(versions) if None in members), None)
        if here is None:
            return None
        there = here - 1 if direction == "prev" else here + 1
        if not 0 <= there < len(versions):
            return None
        stored = [branch for branch in versions[there] if branch is not None]
        return max(stored, key=lambda branch: branch.seen) if stored else None
