"""The file checkpoint and trusted-result methods every Agent has.

A mixin of :class:`~deputy_shiny.agent.Agent` (only Agent uses it): ``checkpoint``,
``list_checkpoints``, ``rewind_files``, the ``file_checkpoints`` journal and the
``trusted_results`` policy. The work is done in
:mod:`deputy_shiny.persistence.checkpoints` and :mod:`deputy_shiny.trusted`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import CheckpointCorruptError, CheckpointError, ConfigurationError
from ..persistence.checkpoints import FileCheckpoint, FileJournal, FileRewind
from ..persistence.sessions import SessionSection, register_session_section
from ..trusted import TrustedResults, check_trusted_tools
from ._tool_registry import ToolSetCheck

__all__ = ["CheckpointMethods", "make_file_journal", "trusted_check"]


def make_file_journal(
    enabled: bool,
    working_dir: os.PathLike[str],
    *,
    directory: str | os.PathLike[str] | None,
    max_file_bytes: int,
    max_journal_bytes: int,
) -> FileJournal | None:
    """The agent's journal when ``enable_file_checkpointing`` is on, else None."""
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


class CheckpointMethods:
    """An Agent's file checkpoint methods (mixed into :class:`~deputy_shiny.agent.Agent`)."""

    _file_journal: FileJournal | None  # set by Agent.__init__
    _trusted_results: TrustedResults | None  # set by Agent.__init__

    if TYPE_CHECKING:

        def _ensure_idle(self, action: str) -> None: ...

    @property
    def trusted_results(self) -> TrustedResults | None:
        """The agent's :class:`~deputy_shiny.trusted.TrustedResults` policy, or None (read-only)."""
        return self._trusted_results

    @property
    def file_checkpoints(self) -> FileJournal | None:
        """The file checkpoint journal (None unless ``enable_file_checkpointing=True``).

        A saved session keeps ``file_checkpoints.checkpoint_state()`` (a JSON-only dict)
        and gives it back with ``file_checkpoints.restore_checkpoint_state(state)``.
        """
        return self._file_journal

    def _journal(self) -> FileJournal:
        if self._file_journal is None:
            raise CheckpointError(
                "File checkpointing is off; create the Agent with enable_file_checkpointing=True."
            )
        return self._file_journal

    def checkpoint(self, name: str | None = None, metadata: Mapping[str, Any] | None = None) -> str:
        """Make a file checkpoint :meth:`rewind_files` can go back to; returns its id.

        Example:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), working_dir=tempfile.mkdtemp(),
            ...               enable_file_checkpointing=True)
            >>> cid = agent.checkpoint("before the refactor", {"ticket": 7})
            >>> [c.name for c in agent.list_checkpoints()]
            ['before the refactor']
        """
        return self._journal().checkpoint(name, metadata).id

    def list_checkpoints(self) -> list[FileCheckpoint]:
        """The file checkpoints, oldest first: id, name, metadata, created_at, run_id and
        the number of file changes recorded after each (empty when checkpointing is off)."""
        if self._file_journal is None:
            return []
        return self._file_journal.list_checkpoints()

    def rewind_files(self, checkpoint_id: str) -> FileRewind:
        """Restore the files ``write_file``, ``edit_file`` and ``multi_edit`` changed since
        ``checkpoint_id`` (deleting those created since), and discard later checkpoints.

        The conversation does not change. Changes made by other tools (``run_bash``,
        ``run_python``, MCP) are not undone.

        Raises:
            AgentBusyError: a run is in progress.
            CheckpointError: checkpointing is off or the id is unknown; its subclasses
                when a path or the journal was tampered with (nothing is restored then).

        Example:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), working_dir=tempfile.mkdtemp(),
            ...               enable_file_checkpointing=True)
            >>> agent.rewind_files(agent.checkpoint()).restored_changes
            0
        """
        self._ensure_idle("rewind files")
        return self._journal().rewind(checkpoint_id)


# ---------------------------------------------------------------- saved sessions


def _save_checkpoints(agent: CheckpointMethods) -> dict[str, Any] | None:
    journal = agent._file_journal
    if journal is None or not journal.list_checkpoints():
        return None
    return journal.checkpoint_state()


def _load_checkpoints(agent: CheckpointMethods, data: Any) -> Callable[[], None]:
    if not isinstance(data, Mapping):
        raise TypeError("not an object")
    journal = agent._file_journal
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


register_session_section(
    SessionSection("file_checkpoints", _save_checkpoints, _load_checkpoints, order=0)
)
