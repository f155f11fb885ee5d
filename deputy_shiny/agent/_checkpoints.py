"""File checkpoints: the :class:`FileCheckpoints` component and the Agent methods over it.

``checkpoint``, ``list_checkpoints``, ``rewind_files`` and the ``file_checkpoints``
journal, and the saved sessions' ``file_checkpoints`` section; also the registry check
of the ``trusted_results`` policy. The work is done in
:mod:`deputy_shiny.persistence.checkpoints` and :mod:`deputy_shiny.trusted`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..errors import CheckpointCorruptError, CheckpointError, ConfigurationError
from ..persistence.checkpoints import FileCheckpoint, FileJournal, FileRewind
from ..persistence.sessions import Commit
from ..persistence.store import Store
from ..persistence.store_bridge import scope_for
from ..trusted import TrustedResults, check_trusted_tools
from ._guard import Guard
from ._tool_registry import ToolSetCheck

__all__ = ["CheckpointMethods", "FileCheckpoints", "make_file_journal", "trusted_check"]


def make_file_journal(
    enabled: bool,
    working_dir: os.PathLike[str],
    *,
    directory: str | os.PathLike[str] | None,
    max_file_bytes: int,
    max_journal_bytes: int,
    store: Store | None = None,
    session_id: str = "",
) -> FileJournal | None:
    """The agent's journal when ``enable_file_checkpointing`` is on, else None (in
    ``store`` under the session's scope when one is given)."""
    if not isinstance(enabled, bool):
        raise ConfigurationError("enable_file_checkpointing must be True or False")
    if not enabled:
        if directory is not None:
            raise ConfigurationError("checkpoint_dir needs enable_file_checkpointing=True")
        return None
    try:
        return FileJournal(
            working_dir,
            directory=directory,
            max_file_bytes=max_file_bytes,
            max_journal_bytes=max_journal_bytes,
            store=store,
            scope=None if store is None else scope_for(session_id),
        )
    except CheckpointCorruptError:
        raise  # a journal in checkpoint_dir that is not what we wrote
    except CheckpointError as exc:
        raise ConfigurationError(str(exc)) from None


def trusted_check(policy: TrustedResults | None) -> ToolSetCheck | None:
    """The registry check that keeps ``policy``'s trusted tools the only producers."""
    if policy is None:
        return None
    if not isinstance(policy, TrustedResults):
        raise ConfigurationError(
            f"trusted_results must be a TrustedResults or None, not {type(policy).__name__}"
        )
    return partial(check_trusted_tools, policy)


class FileCheckpoints:
    """One agent's file checkpoint journal (None: checkpointing is off) and its guard."""

    def __init__(
        self,
        journal: FileJournal | None,
        guard: Guard,
        notify: Callable[..., None] | None = None,
    ) -> None:
        self.journal = journal
        self._guard = guard
        # The agent's Notification hooks, outside a run: notify(code, message, **details).
        self._notify = notify

    def _on(self) -> FileJournal:
        if self.journal is None:
            raise CheckpointError(
                "File checkpointing is off; create the Agent with enable_file_checkpointing=True."
            )
        return self.journal

    def checkpoint(self, name: str | None, metadata: Mapping[str, Any] | None) -> str:
        """See :meth:`CheckpointMethods.checkpoint`."""
        made = self._on().checkpoint(name, metadata)
        if self._notify is not None:  # as deputy
            self._notify(
                "file_checkpoint_created",
                f"Created file checkpoint {made.id}.",
                checkpoint_id=made.id,
                checkpoint_name=made.name,
            )
        return made.id

    def all(self) -> list[FileCheckpoint]:
        """See :meth:`CheckpointMethods.list_checkpoints`."""
        if self.journal is None:
            return []
        return self.journal.list_checkpoints()

    def rewind(self, checkpoint_id: str) -> FileRewind:
        """See :meth:`CheckpointMethods.rewind_files`."""
        self._guard.idle("rewind files")
        rewound = self._on().rewind(checkpoint_id)
        if self._notify is not None:  # as deputy
            self._notify(
                "files_rewound",
                f"Rewound {rewound.restored_changes} file change(s) to {rewound.checkpoint.id}.",
                checkpoint_id=rewound.checkpoint.id,
                restored_changes=rewound.restored_changes,
                paths=list(rewound.paths),
            )
        return rewound

    # ------------------------------------------------------------ saved sessions

    def save_section(self) -> dict[str, Any] | None:
        """The ``file_checkpoints`` section (None: no checkpoints)."""
        journal = self.journal
        if journal is None or not journal.list_checkpoints():
            return None
        return journal.checkpoint_state()

    def load_section(self, data: Any) -> Commit:
        """Check a ``file_checkpoints`` section; the commit restores the journal."""
        if not isinstance(data, Mapping):
            raise TypeError("not an object")
        journal = self.journal
        if journal is None:
            raise CheckpointError(
                "The session holds file checkpoints, but this agent has checkpointing off; "
                "create it with enable_file_checkpointing=True to load them."
            )

        def commit() -> None:
            # Checks everything before it writes, and leaves the journal as it was on any
            # problem; it runs first (order 0, and its name sorts first), before any other
            # commit changes the agent.
            journal.restore_checkpoint_state(data)

        return commit


class CheckpointMethods:
    """An Agent's file checkpoint methods, façades over its :class:`FileCheckpoints`."""

    _checkpoints: FileCheckpoints  # made by Agent.__init__

    @property
    def file_checkpoints(self) -> FileJournal | None:
        """The file checkpoint journal (None unless ``enable_file_checkpointing=True``).

        A saved session keeps ``file_checkpoints.checkpoint_state()`` (a JSON-only dict)
        and gives it back with ``file_checkpoints.restore_checkpoint_state(state)``.
        """
        return self._checkpoints.journal

    def checkpoint(self, name: str | None = None, metadata: Mapping[str, Any] | None = None) -> str:
        """Make a file checkpoint :meth:`rewind_files` can go back to; returns its id.

        Examples:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), working_dir=tempfile.mkdtemp(),
            ...               enable_file_checkpointing=True)
            >>> cid = agent.checkpoint("before the refactor", {"ticket": 7})
            >>> [c.name for c in agent.list_checkpoints()]
            ['before the refactor']
        """
        return self._checkpoints.checkpoint(name, metadata)

    def list_checkpoints(self) -> list[FileCheckpoint]:
        """The file checkpoints, oldest first: id, name, metadata, created_at, run_id and
        the number of file changes recorded after each (empty when checkpointing is off)."""
        return self._checkpoints.all()

    def rewind_files(self, checkpoint_id: str) -> FileRewind:
        """Restore the files ``write_file``, ``edit_file`` and ``multi_edit`` changed since
        ``checkpoint_id`` (deleting those created since), and discard later checkpoints.

        The conversation does not change. Changes made by other tools (``run_bash``,
        ``run_python``, MCP) are not undone.

        Raises:
            AgentBusyError: a run is in progress.
            CheckpointError: checkpointing is off or the id is unknown; its subclasses
                when a path or the journal was tampered with (nothing is restored then).

        Examples:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), working_dir=tempfile.mkdtemp(),
            ...               enable_file_checkpointing=True)
            >>> agent.rewind_files(agent.checkpoint()).restored_changes
            0
        """
        return self._checkpoints.rewind(checkpoint_id)
