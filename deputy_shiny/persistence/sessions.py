"""Saved sessions: a conversation as one ``session`` document of named sections.

``agent.save_session(path)`` writes (through :mod:`deputy_shiny.persistence.files`)::

    {"metadata": {"saved_at", "deputy_shiny_version", "provider", "model", ...},
     "sections": {"conversation": {...}, "run_context": {...}, "tool_results": {...},
                  "file_checkpoints": {...}, "permission_mode": "standard"}}

Each section is owned by the part of deputy_shiny that knows it, through a
:class:`SessionSection` in a registry: ``save(agent)`` returns its JSON (or None to
leave it out); ``load(agent, data)`` checks the data and returns a *commit*, a function
that applies it. Loading checks every section before committing any, so a file that is
corrupt, truncated, tampered with, or that conflicts with the agent leaves the agent as
it was. Commits run in ``order``: one that can fail (a file write) must come before the
in-memory ones, which cannot. Later features (file checkpoints, durable approvals) add
their state by registering a section; a file holding a section no registered part
knows is refused.

Never saved: tools, permissions (only the mode's name, restored as a narrowing and never
a widening), hooks, approvals, the model's credentials.

Examples:
    >>> from deputy_shiny.persistence.sessions import session_sections
    >>> sorted(s.name for s in session_sections())
    ['conversation', 'file_checkpoints', 'permission_mode', 'run_context', 'tool_results']
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, DeputyError, PersistenceCorruptError
from .files import read_document, write_document

__all__ = [
    "SESSION_KIND",
    "SessionSection",
    "check_session_payload",
    "read_session",
    "register_session_section",
    "session_payload",
    "session_sections",
    "write_session",
]

SESSION_KIND = "session"
SESSION_VERSION = 1

Commit = Callable[[], None]


@dataclass(frozen=True)
class SessionSection:
    """One named part of a saved session.

    Attributes:
        name: The key under ``sections``.
        save: ``save(agent)``: the section's JSON data, or None to leave it out.
        load: ``load(agent, data)``: check ``data`` (raise a DeputyError, or any error
            for malformed data) and return the commit that applies it. It must not
            change the agent itself.
        order: Commits run in ascending order.
        required: A file without this section is refused.
    """

    name: str
    save: Callable[[Any], Any]
    load: Callable[[Any, Any], Commit]
    order: int = 50
    required: bool = False


_SECTIONS: dict[str, SessionSection] = {}


def register_session_section(section: SessionSection, *, replace: bool = False) -> None:
    """Add a section to every saved session (a name already taken is an error)."""
    if section.name in _SECTIONS and not replace:
        raise ConfigurationError(f"A session section named {section.name!r} is registered.")
    _SECTIONS[section.name] = section


def session_sections() -> list[SessionSection]:
    """The registered sections, in commit order."""
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))


def session_payload(agent: Any, metadata: dict[str, Any]) -> dict[str, Any]:
    """``agent``'s saved session as JSON data (what :func:`write_session` writes, and
    what a store keeps as a record's payload): its sections and ``metadata``, stamped."""
    sections: dict[str, Any] = {}
    for section in session_sections():
        data = section.save(agent)
        if data is not None:
            sections[section.name] = data
    stamped = {
        "saved_at": datetime.datetime.now(datetime.UTC).isoformat(),
        **metadata,
    }
    return {"metadata": stamped, "sections": sections}


def write_session(
    agent: Any,
    path: str | os.PathLike[str],
    metadata: dict[str, Any],
    *,
    key: bytes | str | None = None,
) -> Path:
    """Save ``agent``'s sections and ``metadata`` to ``path`` (atomically, authenticated
    with ``key``; None: the server's record key)."""
    target = Path(path)
    write_document(target, SESSION_KIND, session_payload(agent, metadata), key=key)
    return target


def read_session(
    agent: Any, path: str | os.PathLike[str], *, key: bytes | str | None = None
) -> Commit:
    """Read and check the session at ``path`` for ``agent``; returns the commit.

    Raises:
        PersistenceError: the file is missing or unreadable.
        PersistenceCorruptError: it is not a session this version wrote (damaged,
            truncated, tampered with, unknown sections, malformed data); a
            :class:`~deputy_shiny.errors.PersistenceNotAuthenticError` when its HMAC
            does not verify under ``key`` (None: the server's record key).
        SessionError: it conflicts with the agent (its run_context IDs).
    """
    source = Path(path)
    payload = read_document(source, SESSION_KIND, versions=(SESSION_VERSION,), key=key)
    return check_session_payload(agent, payload, str(source))


def check_session_payload(agent: Any, payload: Any, source: str) -> Commit:
    """Check a saved session's data (:func:`session_payload`'s, already authenticated)
    for ``agent``; returns the commit that applies it. ``source`` names it in errors.

    Raises:
        PersistenceCorruptError: it is not a session this version wrote.
        SessionError: it conflicts with the agent (its run_context IDs).
    """
    if not isinstance(payload, dict):
        raise PersistenceCorruptError(f"{source}: is not a saved session.")
    sections = payload.get("sections")
    if not isinstance(sections, dict) or not isinstance(payload.get("metadata"), dict):
        raise PersistenceCorruptError(f"{source}: is not a saved session (no sections).")
    unknown = sorted(set(sections) - set(_SECTIONS))
    if unknown:
        raise PersistenceCorruptError(
            f"{source}: holds sections this deputy_shiny does not know: {', '.join(unknown)}."
        )
    commits: list[Commit] = []
    for section in session_sections():
        if section.name not in sections:
            if section.required:
                raise PersistenceCorruptError(f"{source}: has no {section.name!r} section.")
            continue
        try:
            commits.append(section.load(agent, sections[section.name]))
        except DeputyError:
            raise
        except Exception as exc:
            raise PersistenceCorruptError(
                f"{source}: its {section.name!r} section is not valid "
                f"({type(exc).__name__}: {str(exc)[:300]})."
            ) from None

    def commit() -> None:
        for apply in commits:
            apply()

    return commit
