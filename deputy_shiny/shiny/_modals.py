"""The modals' markup: an approval card and an ask_user form (all text escaped).

Everything shown comes from the model or a tool (names, descriptions, arguments,
questions), so it is passed to htmltools as text, which escapes it; nothing here is
raw HTML. The buttons carry ``data-deputy-action``; ``deputy_shiny.js`` collects the
values and sends them back through the ``deputy_modal_answer`` input, only on a real
(trusted) click and with the prompt's key (see :mod:`._prompts`); nothing secret is in
this markup.
"""

from __future__ import annotations

import json
from typing import Any

from htmltools import Tag, tags
from shiny import ui

from ..approvals import ApprovalRequest
from ..tools.interactive import Question
from ._strings import DEFAULT_STRINGS, KitStrings

# An annotation -> (its badge when true, when false): the class names the badge, the
# app's strings word it.
_BADGES = {
    "read_only_hint": ("read-only", "writes"),
    "destructive_hint": ("destructive", None),
    "open_world_hint": ("open-world", None),
    "idempotent_hint": ("idempotent", None),
}
_BADGE_WORDS = {
    "read-only": "badge_read_only",
    "writes": "badge_writes",
    "destructive": "badge_destructive",
    "open-world": "badge_open_world",
    "idempotent": "badge_idempotent",
}


def _badges(annotations: dict[str, bool], strings: KitStrings) -> list[Tag]:
    out = []
    for key, (when_true, when_false) in _BADGES.items():
        value = annotations.get(key)
        badge = when_true if value else when_false if value is False else None
        if badge:
            label = getattr(strings, _BADGE_WORDS[badge])
            out.append(tags.span(label, class_=f"badge deputy-badge deputy-badge-{badge}"))
    return out


def argument_kind(schema: dict[str, Any], name: str, value: Any) -> str | None:
    """How the modal edits argument ``name``: ``"boolean"``, ``"integer"``, ``"number"``,
    ``"string"``, or None for anything else (a list, an object: edited as JSON text)."""
    prop = schema.get("properties", {}).get(name, {})
    declared = prop.get("type")
    if isinstance(value, bool) or declared == "boolean":
        return "boolean"
    if declared in ("integer", "number") or isinstance(value, int | float):
        return "integer" if declared == "integer" or isinstance(value, int) else "number"
    if isinstance(value, str) or declared == "string":
        return "string"
    return None


def _argument_field(name: str, value: Any, kind: str | None, field_id: str) -> Tag:
    label = tags.label(name, class_="form-label deputy-arg-name", for_=field_id)
    if kind == "boolean":
        box = tags.input(
            type="checkbox", class_="form-check-input", data_arg=name, data_type=kind, id=field_id
        )
        if value:
            box.attrs["checked"] = "checked"
        return tags.div(box, label, class_="form-check deputy-arg")
    if kind in ("integer", "number"):
        step = "1" if kind == "integer" else "any"
        field = tags.input(
            type="number",
            step=step,
            value=str(value),
            class_="form-control",
            data_arg=name,
            data_type=kind,
            id=field_id,
        )
        return tags.div(label, field, class_="mb-2 deputy-arg")
    if kind == "string":
        text = str(value)
        if "\n" in text or len(text) > 80:
            field = tags.textarea(
                text, rows="4", class_="form-control", data_arg=name, data_type=kind, id=field_id
            )
        else:
            field = tags.input(
                type="text",
                value=text,
                class_="form-control",
                data_arg=name,
                data_type=kind,
                id=field_id,
            )
        return tags.div(label, field, class_="mb-2 deputy-arg")
    # A list or an object: edited as JSON text, parsed and checked against the tool's
    # schema on the server before the call runs (shiny/_answers.py, then the gate).
    shown = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    rows = str(min(12, shown.count("\n") + 2))
    field = tags.textarea(
        shown,
        rows=rows,
        spellcheck="false",
        class_="form-control font-monospace deputy-arg-json",
        data_arg=name,
        data_type="json",
        id=field_id,
    )
    return tags.div(label, field, class_="mb-2 deputy-arg")


def waiting_text(waiting: int, strings: KitStrings = DEFAULT_STRINGS) -> str:
    """The modal's count line: "1 of N waiting" from 2 on, else nothing.

    Examples:
        >>> waiting_text(3), waiting_text(1)
        ('1 of 3 waiting', '')
    """
    return strings.format("waiting_count", count=waiting) if waiting > 1 else ""


def _waiting(waiting: int, strings: KitStrings) -> Tag | None:
    # deputy_shiny.js rewrites (or adds, or removes) this line when the count changes.
    text = waiting_text(waiting, strings)
    return tags.p(text, class_="deputy-waiting text-muted small") if text else None


def _asker(chat: str | None, strings: KitStrings) -> Tag | None:
    """Which chat of the page asks (several chats share the session's one modal queue)."""
    if not chat:
        return None
    # The chat's name in bold wherever the translation puts it ("{chat} fragt").
    before, _, after = strings.format("asked_by", chat="\0").partition("\0")
    return tags.p(before, tags.strong(chat), after, class_="deputy-asker small")


def _framed(strings: KitStrings) -> dict[str, str]:
    """The line the kit's script shows in a modal of a page another site frames: data
    (an attribute it reads as text), never markup."""
    return {"data-deputy-framed": strings.framed}


TITLE_ID = "deputy-modal-title"
"""The id of the open prompt's heading (Shiny shows one modal at a time)."""


def _title(modal: Tag) -> Tag | None:
    """The ``.modal-title`` heading inside Shiny's modal markup, if any."""
    for child in modal.children:
        if isinstance(child, Tag):
            if "modal-title" in str(child.attrs.get("class", "")).split():
                return child
            found = _title(child)
            if found is not None:
                return found
    return None


def modeless(modal: Tag) -> Tag:
    """``modal`` without a backdrop or a focus trap: the rest of the page (another chat
    on it) stays usable while a prompt waits. It is a ``role="dialog"`` labelled by its
    heading, without ``aria-modal`` (``deputy_shiny.js`` removes the one Bootstrap adds):
    it does not make the page inert. The script moves the focus to the dialog itself
    when it opens, never to "Approve", so an Enter meant for a chat cannot decide it.

    Examples:
        >>> tag = modeless(ui.modal("Allow?", title="Allow it?", easy_close=False))
        >>> tag.attrs["data-bs-backdrop"], tag.attrs["data-bs-focus"]
        ('false', 'false')
        >>> tag.attrs["role"], tag.attrs["aria-labelledby"]
        ('dialog', 'deputy-modal-title')
    """
    for name in ("data-backdrop", "data-bs-backdrop", "data-bs-focus"):
        modal.attrs[name] = "false"
    modal.attrs["role"] = "dialog"
    title = _title(modal)
    if title is not None:
        title.attrs["id"] = TITLE_ID
        modal.attrs["aria-labelledby"] = TITLE_ID
    return modal.add_class("deputy-modeless")


def approval_modal(
    request: ApprovalRequest,
    waiting: int = 1,
    chat: str | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
) -> Tag:
    """The approval modal for one pending call, naming the ``chat`` that asks.

    ``waiting`` counts the prompts waiting in this session, this one included (calls
    of the same response still to be decided count too); from 2 on the modal says
    "1 of N waiting". "Stop the run" denies this call and ends the run, so a flood of
    approvals never needs one click each.
    """
    # Field ids: the modal's (one at a time on the page) by position, never the name a
    # model chose (it could collide with the page's own ids).
    fields = [
        _argument_field(
            name, value, argument_kind(request.input_schema, name, value), f"deputy-arg-{n}"
        )
        for n, (name, value) in enumerate(request.arguments.items())
    ]
    body = tags.div(
        _waiting(waiting, strings),
        _asker(chat, strings),
        tags.p(request.description, class_="deputy-tool-description"),
        tags.div(*_badges(request.annotations, strings), class_="deputy-badges mb-2"),
        tags.p(tags.strong(strings.why + " "), request.reason, class_="deputy-reason"),
        tags.div(*fields, class_="deputy-args") if fields else tags.p(strings.no_arguments),
        tags.label(
            strings.deny_message_label,
            class_="form-label mt-2",
            for_="deputy-deny-message",
        ),
        tags.textarea(
            class_="form-control deputy-deny-message", rows="2", id="deputy-deny-message"
        ),
        tags.div(
            tags.button(
                strings.approve,
                type="button",
                class_="btn btn-primary",
                data_deputy_action="approve",
            ),
            tags.button(
                strings.deny,
                type="button",
                class_="btn btn-outline-danger",
                data_deputy_action="deny",
            ),
            tags.button(
                strings.always_allow,
                type="button",
                class_="btn btn-outline-secondary",
                data_deputy_action="always",
            ),
            tags.button(
                strings.stop_run,
                type="button",
                class_="btn btn-danger ms-auto",
                data_deputy_action="stop",
            ),
            class_="d-flex gap-2 mt-3 deputy-actions",
        ),
        class_="deputy-approval",
        data_request_id=request.request_id,
        **_framed(strings),
    )
    title = strings.format("approval_title", tool=request.tool_name)
    return modeless(ui.modal(body, title=title, easy_close=False, footer=None, size="l"))


def questions_modal(
    request_id: str,
    questions: list[Question],
    waiting: int = 1,
    chat: str | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
) -> Tag:
    """The ask_user form: radio buttons (or checkboxes for multi-select) plus "Other",
    naming the ``chat`` that asks and how many prompts wait (see :func:`approval_modal`)."""
    sets = []
    for index, question in enumerate(questions):
        kind = "checkbox" if question.multi_select else "radio"
        options = [
            tags.div(
                tags.input(
                    type=kind,
                    class_="form-check-input",
                    name=f"q{index}",
                    id=f"{request_id[:8]}-q{index}-o{n}",
                    value=option.label,
                ),
                tags.label(
                    option.label,
                    tags.span(option.description, class_="deputy-option-description text-muted"),
                    class_="form-check-label",
                    for_=f"{request_id[:8]}-q{index}-o{n}",
                ),
                class_="form-check",
            )
            for n, option in enumerate(question.options)
        ]
        sets.append(
            tags.fieldset(
                tags.legend(question.header, class_="fs-6 fw-semibold"),
                tags.p(question.question, class_="deputy-question-text"),
                *options,
                tags.input(
                    type="text",
                    class_="form-control mt-1 deputy-other",
                    placeholder=strings.other_answer,
                    aria_label=strings.other_answer,
                ),
                class_="deputy-question mb-3",
                data_multi="true" if question.multi_select else "false",
            )
        )
    body = tags.div(
        _waiting(waiting, strings),
        _asker(chat, strings),
        *sets,
        _buttons((strings.submit, "submit", "btn-primary"), _cancel(strings)),
        class_="deputy-questions",
        data_request_id=request_id,
        **_framed(strings),
    )
    return modeless(ui.modal(body, title=strings.question_title, easy_close=False, footer=None))


def _cancel(strings: KitStrings) -> tuple[str, str, str]:
    return (strings.cancel, "cancel", "btn-outline-secondary")


def _buttons(*buttons: tuple[str, str, str]) -> Tag:
    """A modal's row of ``(label, action, bootstrap class)`` buttons."""
    return tags.div(
        *(
            tags.button(label, type="button", class_=f"btn {style}", data_deputy_action=action)
            for label, action, style in buttons
        ),
        class_="d-flex gap-2 deputy-actions",
    )


def confirm_modal(
    request_id: str,
    title: str,
    body: str,
    confirm_label: str,
    strings: KitStrings = DEFAULT_STRINGS,
) -> Tag:
    """A yes/no question from the app itself (rewind files, start anew); its answer's
    action is ``"confirm"`` or ``"cancel"``.

    Examples:
        >>> "Rewind" in str(confirm_modal("r1", "Rewind files?", "Undo the writes.", "Rewind"))
        True
    """
    content = tags.div(
        tags.p(body, class_="deputy-confirm-text"),
        _buttons((confirm_label, "confirm", "btn-danger"), _cancel(strings)),
        class_="deputy-confirm",
        data_request_id=request_id,
        **_framed(strings),
    )
    return modeless(ui.modal(content, title=title, easy_close=False, footer=None))
