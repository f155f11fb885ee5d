"""What a person's answer in the approval modal means: an ApprovalDecision.

One reading for both ways an approval reaches the browser: a live ``approval_handler``
and a durable approval the kit resumes (``KitPersistence``).
"""

from __future__ import annotations

import json
from typing import Any

from ..approvals import ApprovalDecision, ApprovalRequest
from ._modals import argument_kind

__all__ = ["BadEdit", "decision_from_answer", "edited_arguments"]


def decision_from_answer(request: ApprovalRequest, answer: dict[str, Any]) -> ApprovalDecision:
    """The decision the modal's ``answer`` (from ``deputy_shiny.js``) stands for.

    Examples:
        >>> request = ApprovalRequest(call_id="c1", tool_name="write_file",
        ...     arguments={"path": "a.txt"}, agent_id="a", session_id="s", run_id="r")
        >>> decision_from_answer(request, {"action": "approve", "values": {}}).approved
        True
        >>> decision_from_answer(request, {"action": "deny", "message": " no "}).message
        'no'
    """
    action = answer.get("action")
    if action == "stop":
        return ApprovalDecision.stop_run()
    if action in ("approve", "always"):
        try:
            edited = edited_arguments(request, answer.get("values"))
        except BadEdit as exc:
            # Nothing runs on input the person did not mean: the card and the model
            # read why (the JSON's own error), and the model may ask again.
            return ApprovalDecision.deny(str(exc))
        if action == "approve":
            return ApprovalDecision.approve(edited)
        return ApprovalDecision(approved=True, always=True, updated_input=edited)
    message = str(answer.get("message") or "").strip() or None
    return ApprovalDecision.deny(message)


def edited_arguments(request: ApprovalRequest, values: object) -> dict[str, Any] | None:
    """The arguments with the person's edits, or None when nothing changed.

    The browser sends only the fields the person touched (``deputy_shiny.js``), and a
    value counts as an edit only if it differs exactly, type included: a browser
    normalizes what it shows (CRLF to LF, a textarea's leading newline), so echoing an
    untouched field back would silently rewrite what was approved.
    """
    if not isinstance(values, dict):
        return None
    edited = dict(request.arguments)
    changed = False
    for name, value in values.items():
        if name in edited and argument_kind(request.input_schema, name, edited[name]) is None:
            value = _parsed(name, value)  # a list or an object, edited as JSON text
        if name in edited and not _same(edited[name], value):
            edited[name] = value
            changed = True
    return edited if changed else None


class BadEdit(ValueError):
    """An edited argument that is not a value (JSON that does not parse)."""


def _parsed(name: str, text: object) -> Any:
    """The value of a JSON field's ``text``; its schema is the gate's to check."""
    if not isinstance(text, str):
        raise BadEdit(f"the edited value of {name!r} did not arrive as JSON text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadEdit(
            f"the edited value of {name!r} is not valid JSON ({exc.msg} at line "
            f"{exc.lineno}, column {exc.colno}); the call did not run"
        ) from None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
