"""Durable approvals: a tool call saved to wait for a person, decided later, once.

With ``Agent(approval_dir=...)`` and no live ``approval_handler``, a call that needs
approval is saved as one record in the approval directory (``<id>.approval.json``, the
id unguessable, in the format of :mod:`deputy_shiny.persistence.files`) and the run
stops with ``approval_pending``. The record holds the pending
:class:`~deputy_shiny.approvals.ApprovalRequest`, fingerprints of the agent's tool
definitions, the conversation, usage, limits, the permission ceiling and the ids.
:func:`approval_read` reads one (as untrusted input) into an
:class:`ApprovalContinuation`; :meth:`~deputy_shiny.Agent.resume_approval` decides it.

A record's ``status`` moves ``pending -> resuming -> executing -> continuing ->
completed`` (or ``stopped``); every step is written (atomically) before the work it
names. Deciding takes an OS lock on ``<id>.lock`` (held while the run resumes, released
by the kernel if the process dies) and creates ``<id>.decided`` exclusively, so two
resumers cannot both win. A record left ``executing`` by a process that died reads as
``indeterminate``: the tool may have run, and it is never run again. One left
``resuming`` or ``continuing`` reads as ``stopped`` (the tool had not started, or had
finished, and the run did not go on). Nothing is ever retried automatically.

That state machine is one for every backend: :class:`ResumeClaim` records each step
(``resuming`` as decided, then ``executing``, ``continuing`` and the final status), and
:func:`reconciled` and :func:`refuse_decided` say how a record whose resumer is gone
reads and how a second decision is refused. A backend supplies only how a state is
committed and how the record's liveness is held: here a file write under an OS lock;
in a store (:mod:`deputy_shiny.persistence.approval_records`), a conditional update
under a lease.

Examples:
    >>> import tempfile
    >>> from deputy_shiny import Agent, tool, tool_annotations
    >>> from deputy_shiny.permissions import Permissions
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> def send(to: str) -> str:
    ...     "Send a message."
    ...     return f"sent to {to}"
    >>> model = ScriptedModel([
    ...     ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")]),
    ...     "Sent.",
    ... ])
    >>> send_tool = tool(send, annotations=tool_annotations(open_world_hint=False))
    >>> agent = Agent(model, tools=[send_tool], approval_dir=tempfile.mkdtemp(),
    ...               permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)))
    >>> agent.run_sync("Tell ops").stop_reason
    'approval_pending'
    >>> pending = agent.pending_approval()
    >>> pending.status, pending.request.arguments
    ('pending', {'to': 'ops'})
    >>> agent.resume_approval(pending.source.path, "approve").response
    'Sent.'
    >>> approval_read(pending.source.path).status
    'completed'
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..approvals import ApprovalDecision, ApprovalRequest, Suspension
from ..errors import (
    ApprovalDecidedError,
    ApprovalResumeError,
    PersistenceCorruptError,
    PersistenceError,
)
from ..messages import ContentToolRequest, ContentToolResult, Turn
from ..permissions import Permissions
from ..tools import Tool
from ..usage import AgentUsage, UsageLimits
from .files import canonical_json, read_document, write_document

__all__ = [
    "APPROVAL_KIND",
    "ApprovalContinuation",
    "ApprovalRecordStatus",
    "ApprovalSource",
    "ApprovalStore",
    "Claim",
    "ResumeClaim",
    "SavedPermissions",
    "approval_read",
    "continues_conversation",
    "decided_record",
    "reconciled",
    "refuse_decided",
    "tool_fingerprint",
]

APPROVAL_KIND = "approval"
_SUFFIX = ".approval.json"
_ID = re.compile(r"^[A-Za-z0-9_-]{20,100}$")

ApprovalRecordStatus = Literal[
    "pending", "resuming", "executing", "continuing", "completed", "stopped", "indeterminate"
]
_IN_FLIGHT = ("resuming", "executing", "continuing")


def tool_fingerprint(tool: Tool) -> str:
    """A digest of a tool's definition: name, argument schema, annotations and source.

    Examples:
        >>> from deputy_shiny import tool
        >>> def ping() -> str:
        ...     "Ping."
        ...     return "pong"
        >>> tool_fingerprint(tool(ping)) == tool_fingerprint(tool(ping))
        True
    """
    definition = {
        "name": tool.name,
        "parameters": tool.parameters,
        "annotations": tool.annotations.model_dump(mode="json"),
        "source": tool.source.model_dump(mode="json"),
    }
    return "sha256:" + hashlib.sha256(canonical_json(definition)).hexdigest()


class ApprovalSource(BaseModel):
    """Where an approval is saved and whose it is.

    Attributes:
        path: The record's path: pass it to ``resume_approval``.
        approval_dir / working_dir: The directories of the agent that saved it.
        agent_id / session_id / run_id / call_id: The agent, session, run and tool call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    approval_dir: str
    working_dir: str
    agent_id: str
    session_id: str
    run_id: str
    call_id: str


class SavedPermissions(BaseModel):
    """The permission ceiling saved with an approval: the settings, and whether a
    ``can_use_tool`` callback was set (the resuming agent must have one too)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    settings: dict[str, Any]
    callback: bool = False

    def permissions(self) -> Permissions:
        """The saved settings as :class:`~deputy_shiny.permissions.Permissions` (no callback)."""
        return Permissions(**self.settings)


class ApprovalContinuation(BaseModel):
    """A durable approval as read from its record: an inspection value, not a grant.

    Attributes:
        id: The approval's id (unguessable; the record is ``<id>.approval.json``).
        status: ``pending``, ``resuming``, ``executing``, ``continuing``, ``completed``,
            ``stopped`` or ``indeterminate`` (see :mod:`deputy_shiny.persistence.approvals`).
        request: The pending :class:`~deputy_shiny.approvals.ApprovalRequest`.
        decision: The recorded decision, or None while pending.
        context: The run context of the run that paused.
        usage: Usage of that run up to the pause (it still counts on resume).
        usage_limits: The paused run's limits; ``budget_ceiling``: the agent's limits then.
        permissions: The permission ceiling saved with it.
        tools: Fingerprints of the agent's tool definitions, by name.
        turns: The conversation up to and including the response that made the calls.
        calls: That response's tool calls; ``results``: their results so far.
        effects: A journal of what happened (``executing``, ``executed``...), with times.
        source: Where it is saved and whose it is (``source.path`` resumes it).
        stop_reason: How the resumed run ended, once it did.
        note: Why a record ended as it did, when it was not by a normal run.
        created_at / updated_at: Unix times.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    status: ApprovalRecordStatus
    request: ApprovalRequest
    decision: ApprovalDecision | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    usage: AgentUsage = Field(default_factory=AgentUsage)
    usage_limits: UsageLimits = Field(default_factory=UsageLimits)
    budget_ceiling: UsageLimits = Field(default_factory=UsageLimits)
    permissions: SavedPermissions
    tools: dict[str, str] = Field(default_factory=dict)
    turns: list[Turn] = Field(default_factory=list)
    calls: list[ContentToolRequest] = Field(default_factory=list)
    results: list[ContentToolResult] = Field(default_factory=list)
    effects: list[dict[str, Any]] = Field(default_factory=list)
    source: ApprovalSource
    stop_reason: str | None = None
    note: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


# ------------------------------------------------------------------ reading


def _record_id(path: Path) -> str:
    name = path.name
    approval_id = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
    if not _ID.match(approval_id):
        raise PersistenceError(f"{path}: is not a durable approval record (<id>{_SUFFIX}).")
    return approval_id


def _load(path: Path, key: bytes | str | None = None) -> ApprovalContinuation:
    """The record as stored (status not reconciled), checked as untrusted input."""
    approval_id = _record_id(path)
    payload = read_document(path, APPROVAL_KIND, key=key)
    return validated_record(payload, approval_id, str(path))


def validated_record(payload: Any, approval_id: str, path: str) -> ApprovalContinuation:
    """An approval record's payload checked as untrusted input, its ``source.path`` set."""
    try:
        record = ApprovalContinuation.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "(record)"
        raise PersistenceCorruptError(
            f"{path}: is not a valid approval record ({where}: {first['msg']})."
        ) from None
    if record.id != approval_id or record.source.call_id != record.request.call_id:
        raise PersistenceCorruptError(f"{path}: its contents do not match its name.")
    return record.model_copy(update={"source": record.source.model_copy(update={"path": path})})


def _lock_path(path: Path, approval_id: str) -> Path:
    return path.parent / f"{approval_id}.lock"


def _decided_path(path: Path, approval_id: str) -> Path:
    return path.parent / f"{approval_id}.decided"


def _owner_alive(path: Path, approval_id: str) -> bool:
    """True while a process holds the approval's lock (it is resuming it now)."""
    try:
        fd = os.open(_lock_path(path, approval_id), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we took
    return False


def reconciled(record: ApprovalContinuation, decided_marker: bool = False) -> ApprovalContinuation:
    """The status of a record whose resuming process is gone."""
    status, note = record.status, None
    if status == "executing":
        status = "indeterminate"
        note = "The process running the tool ended; the tool may have run, and is not run again."
    elif status == "resuming":
        status = "stopped"
        note = "The process resuming it ended before the tool started; the tool did not run."
    elif status == "continuing":
        status = "stopped"
        note = "The tool ran; the process continuing the run ended before the run did."
    elif status == "pending" and decided_marker:
        status = "stopped"
        note = "A process deciding it ended before recording the decision; the tool did not run."
    if status == record.status:
        return record
    effect = {"event": status, "call_id": record.request.call_id, "at": time.time()}
    return record.model_copy(
        update={"status": status, "note": note, "effects": [*record.effects, effect]}
    )


def approval_read(
    path: str | os.PathLike[str], *, key: bytes | str | None = None
) -> ApprovalContinuation:
    """Read a durable approval without running anything: an inspection value, not a grant.

    ``path`` is the record's path (from the ``approval`` event or
    ``agent.pending_approval().source.path``). The file is checked as untrusted input
    (format, version, its HMAC under ``key`` (None: the server's record key, as the agent
    that saved it used), every field): a record anyone without the key wrote or changed
    is a :class:`~deputy_shiny.errors.PersistenceNotAuthenticError`. A record whose
    resuming process died shows its final state (``indeterminate`` or ``stopped``; see
    the module docs).

    Raises:
        PersistenceError: no such record, or not an approval record's name.
        PersistenceCorruptError: the file is damaged, edited, not authentic or not an
            approval record.

    Examples:
        >>> import tempfile, pathlib
        >>> approval_read(pathlib.Path(tempfile.mkdtemp()) / "x.approval.json")
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.PersistenceError: ...: is not a durable approval record ...
    """
    source = Path(path)
    record = _load(source, key)
    if record.status in _IN_FLIGHT or record.status == "pending":
        marker = _decided_path(source, record.id).exists()
        if record.status == "pending" and not marker:
            return record
        if not _owner_alive(source, record.id):
            return reconciled(record, marker)
    return record


# ------------------------------------------------------------------ the store


@dataclass
class ApprovalStore:
    """Saves an agent's paused calls and claims them for resuming (package-internal).

    Built by the Agent from what it is now: its approval dir, ids, working dir,
    permission ceiling, limits and tool fingerprints.
    """

    approval_dir: Path
    working_dir: Path
    agent_id: str
    session_id: str
    permissions: Permissions
    budget_ceiling: UsageLimits
    tools: Mapping[str, Tool]
    on_suspend: Callable[[str], None] = field(default=lambda path: None)

    def fingerprints(self) -> dict[str, str]:
        """The fingerprint of each tool, by name."""
        return {name: tool_fingerprint(tool) for name, tool in sorted(self.tools.items())}

    async def suspend(self, suspension: Suspension) -> str:
        """Save a paused call as a new pending record; return its path."""
        approval_id = secrets.token_urlsafe(24)
        path = self.approval_dir / f"{approval_id}{_SUFFIX}"
        record = self.new_record(suspension, approval_id, str(path), str(self.approval_dir))
        fd = os.open(
            _lock_path(path, approval_id), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
        )
        os.close(fd)
        write_document(path, APPROVAL_KIND, record.model_dump(mode="json"), overwrite=False)
        self.on_suspend(str(path))
        return str(path)

    def new_record(
        self, suspension: Suspension, approval_id: str, path: str, approval_dir: str
    ) -> ApprovalContinuation:
        """The pending record of a paused call, saved at ``path``."""
        now = time.time()
        request = suspension.request
        return ApprovalContinuation(
            id=approval_id,
            status="pending",
            request=request,
            context=dict(suspension.run_context),
            usage=suspension.usage,
            usage_limits=suspension.limits,
            budget_ceiling=self.budget_ceiling,
            permissions=SavedPermissions(
                settings=self.permissions.model_dump(mode="json", exclude={"can_use_tool"}),
                callback=self.permissions.can_use_tool is not None,
            ),
            tools=self.fingerprints(),
            turns=list(suspension.turns),
            calls=list(suspension.calls),
            results=list(suspension.results),
            source=ApprovalSource(
                path=path,
                approval_dir=approval_dir,
                working_dir=str(self.working_dir),
                agent_id=self.agent_id,
                session_id=self.session_id,
                run_id=suspension.run_id,
                call_id=request.call_id,
            ),
            created_at=now,
            updated_at=now,
        )

    async def claim(
        self,
        path: str | os.PathLike[str],
        decision: ApprovalDecision,
        check: Callable[[ApprovalContinuation], None],
    ) -> Claim:
        """Decide a pending record, once: lock it, check it with ``check`` (which raises
        to refuse; nothing is recorded then), mark it decided, record ``resuming``.

        Raises:
            ApprovalResumeError: the path is not an approval of this agent's directory.
            ApprovalDecidedError: it was decided already, or is being resumed now.
            PersistenceError / PersistenceCorruptError: it cannot be read as a record.
        """
        source = Path(path)
        approval_id = _record_id(source)
        if source.parent.resolve() != self.approval_dir.resolve():
            raise ApprovalResumeError(
                f"{source}: is not in this agent's approval_dir ({self.approval_dir})."
            )
        lock = _lock_path(source, approval_id)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise PersistenceError(f"{lock}: cannot be opened ({exc.strerror or exc}).") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ApprovalDecidedError(
                f"{source}: another process is resuming this approval now.", status="resuming"
            ) from None
        try:
            record = _load(source)
            marker = _decided_path(source, approval_id)
            if record.status != "pending" or marker.exists():
                final = reconciled(record, marker.exists())
                if final is not record:
                    _write(source, final)
                raise refuse_decided(str(source), final.status)
            check(record)
            try:
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                raise refuse_decided(str(source)) from None
            record = decided_record(record, decision)
            _write(source, record)
            return Claim(source, fd, record)
        except BaseException:
            os.close(fd)
            raise


def _write(path: Path, record: ApprovalContinuation) -> None:
    payload = record.model_dump(mode="json")
    payload["source"]["path"] = str(path)
    write_document(path, APPROVAL_KIND, payload)


def refuse_decided(where: str, status: str | None = None) -> ApprovalDecidedError:
    """The error a second decision gets: ``status`` the record's final one, or None when
    another resumer won the race just now (it is ``resuming``)."""
    if status is None:
        return ApprovalDecidedError(
            f"{where}: this approval was already decided.", status="resuming"
        )
    return ApprovalDecidedError(
        f"{where}: this approval was already decided (status {status!r}); "
        "each approval can be decided once.",
        status=status,
    )


def _advanced(
    record: ApprovalContinuation, effect: str | None, update: Mapping[str, Any]
) -> ApprovalContinuation:
    """``record`` with ``update`` applied, ``effect`` journaled and the time now."""
    now = time.time()
    effects = list(record.effects)
    if effect is not None:
        effects.append({"event": effect, "call_id": record.request.call_id, "at": now})
    return record.model_copy(update={**update, "effects": effects, "updated_at": now})


def decided_record(
    record: ApprovalContinuation, decision: ApprovalDecision
) -> ApprovalContinuation:
    """A pending record as its winner decides it: ``resuming``, with the decision."""
    return _advanced(record, "decided", {"status": "resuming", "decision": decision})


class ResumeClaim:
    """A record this process decided and is resuming (the engine's
    :class:`~deputy_shiny._engine.durable.Resumption`): it records each step before the
    work it names, and lets the record go at :meth:`finish`. One state machine for every
    backend; a subclass says how a state is committed (:meth:`_commit`) and how the
    record is let go (:meth:`release`).

    Attributes:
        path: Where the record is (a file's path, or a store reference).
        record: The record as this resumer last committed it.
        lost: True once another process ended the record (a commit was refused); then
            nothing more is written.
    """

    def __init__(self, path: Any, record: ApprovalContinuation) -> None:
        self.path = path
        self.record = record
        assert record.decision is not None
        self.approval = record.request
        self.decision: ApprovalDecision = record.decision
        self.calls = tuple(record.calls)
        self.results = tuple(record.results)
        self.prior_usage = record.usage
        self.lost = False

    async def _commit(self, record: ApprovalContinuation) -> bool:
        """Save ``record`` as the new state; False when another process ended it first."""
        raise NotImplementedError

    async def release(self) -> None:
        """Let go of the record (its lock or lease)."""
        raise NotImplementedError

    async def write(self, *, status: str, effect: str | None = None, **update: Any) -> None:
        """Record a new state (before what it announces happens)."""
        record = _advanced(self.record, effect, {**update, "status": status})
        if self.lost:
            return
        if await self._commit(record):
            self.record = record
        else:
            self.lost = True

    async def executing(self) -> None:
        """The tool is about to run: from now on a crash means ``indeterminate``.

        Raises:
            ApprovalDecidedError: another process ended the record first: the tool
                does not run.
        """
        await self.write(status="executing", effect="executing")
        if self.lost:
            raise ApprovalDecidedError(
                f"{self.path}: another process ended this approval while it was resuming; "
                "the tool does not run.",
                status="stopped",
            )

    async def executed(self, result: ContentToolResult) -> None:
        """The call has its result (it ran, or was refused): the run continues."""
        results = [r for r in self.record.results if r.call_id != result.call_id]
        await self.write(
            status="continuing",
            results=[*results, result],
            effect="executed" if self.record.status == "executing" else "refused",
        )

    async def finish(self, stop_reason: str | None, error: BaseException | None = None) -> None:
        """The resumed run ended: record how, and let the record go."""
        try:
            status = self.record.status
            if status == "executing":
                await self.write(
                    status="indeterminate",
                    stop_reason=stop_reason,
                    note="The run ended while the tool was running; it is not run again.",
                    effect="indeterminate",
                )
            elif status in ("resuming", "continuing"):
                final = "completed" if stop_reason == "complete" else "stopped"
                note = None if error is None else f"The resumed run failed: {error}"
                await self.write(status=final, stop_reason=stop_reason, note=note, effect=final)
        finally:
            await self.release()


class Claim(ResumeClaim):
    """A file record this process decided and is resuming: it holds the OS lock until
    :meth:`finish`, and writes each state atomically."""

    def __init__(self, path: Path, fd: int, record: ApprovalContinuation) -> None:
        super().__init__(path, record)
        self._fd: int | None = fd

    async def _commit(self, record: ApprovalContinuation) -> bool:
        _write(self.path, record)  # the lock is ours: no other process writes it
        return True

    async def release(self) -> None:
        """Let the lock go (closing the file releases it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def continues_conversation(record: ApprovalContinuation, turns: list[Turn]) -> bool:
    """True when an agent whose conversation is ``turns`` may resume ``record``: a new
    agent (no turns: the record's are used), or one still at the pause (the record's
    turns, plus at most the paused call's placeholder result). A conversation that
    moved on past the pause can never resume it.

    Examples:
        >>> from types import SimpleNamespace
        >>> from deputy_shiny.messages import ContentText, Turn
        >>> hi = Turn(role="user", contents=[ContentText(text="hi")])
        >>> record = SimpleNamespace(turns=[hi])
        >>> [continues_conversation(record, t) for t in ([], [hi], [hi, hi], [hi, hi, hi])]
        [True, True, True, False]
    """
    saved = record.turns
    return not turns or (turns[: len(saved)] == saved and len(turns) <= len(saved) + 1)


def find_pending(approval_dir: Path, agent_id: str, session_id: str) -> ApprovalContinuation | None:
    """The newest pending approval of this agent and session in ``approval_dir``.

    Unreadable or foreign records are skipped (they are not this agent's to decide).
    """
    best: ApprovalContinuation | None = None
    for path in approval_dir.glob(f"*{_SUFFIX}"):
        try:
            record = approval_read(path)
        except PersistenceError:
            continue
        source = record.source
        if record.status != "pending" or (source.agent_id, source.session_id) != (
            agent_id,
            session_id,
        ):
            continue
        if best is None or record.created_at > best.created_at:
            best = record
    return best
