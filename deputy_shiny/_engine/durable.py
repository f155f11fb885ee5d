"""What the engine knows of durable approvals: a pause it hands over, a decision it resumes.

The engine never reads or writes approval files. When a call needs approval, nobody can
answer it live and the run has a :class:`DurableStore` (``RunDeps.durable``), the engine
describes the pause as a :class:`~deputy_shiny.approvals.Suspension` and the store saves
it (returning its path or reference); the run then stops with ``approval_pending``. A
later run resumes a saved pause through a :class:`Resumption` (``RunOptions.resume``):
the decided call is judged again, run once (the store records ``executing`` before the
tool starts and ``continuing`` after it), and the run goes on from the saved
conversation. :mod:`deputy_shiny.persistence.approvals` (files) and
:mod:`deputy_shiny.persistence.approval_records` (a ``Store``) implement both.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..approvals import ApprovalDecision, ApprovalRequest, Suspension
from ..messages import ContentToolRequest, ContentToolResult
from ..usage import AgentUsage

__all__ = ["NOT_EXECUTED", "DurableStore", "Resumption", "json_only_problem"]

NOT_EXECUTED = (
    "Not executed: the run paused for a person's approval of an earlier call of this "
    "response, so this call did not run. Request it again if it is still needed."
)
"""What the model is told about the calls after a paused one (they never run)."""


class DurableStore(Protocol):
    """Where a run saves a call that waits for approval (``RunDeps.durable``)."""

    async def suspend(self, suspension: Suspension) -> str:
        """Save the pause; return the path (or reference) to resume it with. Raises on
        failure. A coroutine: a store in a database is written without blocking the loop."""
        ...


class Resumption(Protocol):
    """A saved pause being resumed (``RunOptions.resume``), already claimed once.

    ``approval`` is the saved request, ``decision`` the person's answer, ``calls`` and
    ``results`` the paused response's calls and its saved results, ``prior_usage`` the
    usage before the pause. The engine calls :meth:`executing` right before the tool
    runs (a crash after it leaves the approval ``indeterminate``, never re-run) and
    :meth:`executed` with the call's result (ran or refused).
    """

    approval: ApprovalRequest
    decision: ApprovalDecision
    calls: tuple[ContentToolRequest, ...]
    results: tuple[ContentToolResult, ...]
    prior_usage: AgentUsage

    async def executing(self) -> None: ...

    async def executed(self, result: ContentToolResult) -> None: ...


def json_only_problem(value: Any, where: str = "arguments") -> str | None:
    """Why ``value`` is not plain JSON data (None when it is).

    A call that waits for a durable approval is saved and later run from its JSON, so
    the tool must take JSON-only arguments: the values its argument validation produces
    must be dicts with string keys, lists, strings, finite numbers, booleans and None,
    nothing converted to other Python objects.

    Examples:
        >>> json_only_problem({"path": "a.txt", "n": [1, 2.5, None]}) is None
        True
        >>> json_only_problem({"when": (1, 2)})
        "arguments['when'] is a tuple"
    """
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if value == value and abs(value) != float("inf") else f"{where} is {value}"
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = json_only_problem(item, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key that is not a string ({key!r})"
            problem = json_only_problem(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    return f"{where} is a {type(value).__name__}"
