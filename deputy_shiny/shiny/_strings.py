"""The words the kit shows: :class:`KitStrings`, one mapping an app replaces to ship the
kit in another language.

Every label, button, note and hint the kit writes itself (the approval, question and
confirm modals, the notes in the chat, the usage line, the panels, the permission-mode
select, and the lines its script writes in the page) is a field here. The defaults are
the kit's English. An app passes its own to ``agent_chat_ui(..., strings=)`` (what the
page shows before the server answers) and ``agent_chat_server(..., strings=)`` (the
rest); the panels take the same object. Every string is shown as text, never markup.

A string that carries values names them as placeholders (``"Allow {tool}?"``): each
field's placeholders are fixed, and a translation that leaves one out or names another
is a ``ConfigurationError`` as the app starts, never a broken modal in front of a
user.
In those, write ``{{`` and ``}}`` for a literal brace; a string without values is
shown as written.

Examples:
    >>> strings = KitStrings(approve="Genehmigen", approval_title="{tool} erlauben?")
    >>> strings.approve, strings.format("approval_title", tool="write_file")
    ('Genehmigen', 'write_file erlauben?')
    >>> KitStrings(approval_title="Allow it?")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.ConfigurationError: Invalid KitStrings: approval_title: ...{tool}...
"""

from __future__ import annotations

import json
import string
from typing import Any

from pydantic import ValidationInfo, field_validator

from .._util.config import FrozenConfig

__all__ = ["DEFAULT_STRINGS", "PLACEHOLDERS", "KitStrings"]

PLACEHOLDERS: dict[str, frozenset[str]] = {
    name: frozenset(fields)
    for name, fields in {
        "approval_title": ("tool",),
        "waiting_count": ("count",),
        "asked_by": ("chat",),
        "agent_not_started": ("error",),
        "model_request_failed_because": ("error",),
        "run_failed_because": ("error",),
        "stopped_because": ("reason",),
        "retrying": ("error", "attempt", "attempts"),
        "warning": ("message",),
        "still_waiting": ("host", "seconds"),
        "still_waiting_rest": ("host", "seconds"),
        "stopped_card_title": ("tool",),
        "usage_line": ("requests", "tokens", "tool_calls", "cost"),
        "checkpoint_run": ("number",),
        "changes_after_many": ("count",),
        "rewound_many": ("count",),
        "rewind_refused": ("error",),
        "new_confirm_body": ("files",),
        "more_checkpoints": ("count",),
        "mcp_tools": ("count",),
        "budget_spent": ("amount",),
        "budget_spent_anonymous": ("amount",),
        "budget_requests": ("spent", "limit"),
        "budget_tokens": ("spent", "limit"),
        "budget_cost": ("spent", "limit"),
        "budget_today": ("amounts",),
        "not_saved_because": ("error",),
        "restore_failed": ("error",),
        "restore_failed_kept": ("error",),
        "approval_not_resumable": ("reasons",),
        "approval_resume_failed": ("error",),
        "run_resume_failed": ("error",),
        "subagent_usage": ("requests", "tokens"),
        "subagent_calls": ("role", "tool"),
        "subagent_result": ("tool",),
        "subagent_result_error": ("tool",),
        "mcp_refused": ("names",),
        "mode_hint_one": ("modes",),
        "mode_hint_many": ("modes",),
        "mode_names_and": ("first", "last"),
        "capped_one": ("limit", "titles"),
        "capped_many": ("limit", "titles"),
        "edit_length": ("limit",),
        "edit_body": ("files",),
        "version_body": ("files",),
        "files_restored_one": ("names",),
        "files_restored_many": ("count", "names"),
        "files_more": ("count",),
    }.items()
}
"""The placeholders each string with values must use (all of them, and no other)."""


class KitStrings(FrozenConfig):
    """Every string the kit shows, by field; the defaults are its English.

    Pass one to ``agent_chat_ui(..., strings=)`` and ``agent_chat_server(...,
    strings=)`` (and the panels' ``strings=``); fields left out keep their English.
    Fields with values use the named placeholders :data:`PLACEHOLDERS` lists (checked
    as the object is made). Each string is shown as text: an app's ``<b>`` shows as
    ``<b>``.

    Examples:
        >>> fr = KitStrings(approve="Approuver", deny="Refuser", cancel="Annuler")
        >>> fr.deny, fr.submit
        ('Refuser', 'Submit')
        >>> fr.format("waiting_count", count=3)
        '1 of 3 waiting'
    """

    # The chat's input, before anything is typed.
    input_placeholder: str = "Ask the agent something"
    # The approval modal.
    approval_title: str = "Allow {tool}?"
    waiting_count: str = "1 of {count} waiting"
    asked_by: str = "Asked by {chat}"
    why: str = "Why:"
    no_arguments: str = "No arguments."
    deny_message_label: str = "Message to the model if you deny (optional)"
    approve: str = "Approve"
    deny: str = "Deny"
    always_allow: str = "Always allow"
    stop_run: str = "Stop the run"
    badge_read_only: str = "read-only"
    badge_writes: str = "writes"
    badge_destructive: str = "destructive"
    badge_open_world: str = "open-world"
    badge_idempotent: str = "idempotent"
    # The question modal (ask_user), and the confirm modal's Cancel.
    question_title: str = "The agent has a question"
    other_answer: str = "Other (type your own answer)"
    submit: str = "Submit"
    cancel: str = "Cancel"
    # The kit's script: a modal in a page framed by another site.
    framed: str = (
        "This app is shown inside another site's page, so it takes no decision here. "
        "Open it in a tab of its own to answer."
    )
    # Notes in the chat.
    busy: str = "The agent is still working; stop it first or wait."
    approval_waiting: str = "An approval is waiting: decide it first, then ask again."
    open_elsewhere: str = "This conversation is open in another window."
    taken_over: str = "This conversation was opened in another window; it continues there."
    not_let_go: str = (
        "This conversation is open in another window that did not let go. "
        "Close it there, then reload this page."
    )
    not_saved: str = "This conversation could not be saved."
    not_saved_because: str = "This conversation could not be saved ({error})."
    not_saved_signed_in_only: str = (
        "Conversations are saved here for signed-in users only; this one ends with the page."
    )
    not_saved_no_connection: str = "This session has no browser connection, so nothing is saved."
    not_saved_cookie_twice: str = (
        "This browser sent its conversation cookie twice (another page may have set "
        "one), so this conversation is not saved. Clearing this site's cookies fixes it."
    )
    not_saved_no_storage: str = (
        "This browser keeps no local storage for this page, so this conversation is not saved."
    )
    not_saved_here: str = "This conversation cannot be saved on this server."
    restore_failed: str = (
        "Your saved conversation could not be restored ({error}); a new one started."
    )
    restore_failed_kept: str = (
        "Your saved conversation could not be restored ({error}); it was kept on the "
        "server, and a new one started."
    )
    approval_decided_elsewhere: str = (
        "This approval was decided already (in another window); it runs only once."
    )
    approval_not_resumable: str = "This approval can no longer be resumed here: {reasons}"
    approval_resume_failed: str = "The approval could not be resumed ({error})."
    run_resuming: str = (
        "The server that was writing this reply stopped; the reply goes on here in a moment."
    )
    run_resume_failed: str = "The reply that was in progress could not be picked up ({error})."
    run_ended_elsewhere: str = "The reply that was in progress was ended by the server running it."
    run_still_held: str = (
        "The reply that was in progress is still held by another server; reload the page "
        "later to pick it up."
    )
    store_down: str = (
        "The conversation store cannot be reached just now, so this reply was not saved. "
        "Nothing saved before is lost, and the conversation is saved again after a reply "
        "once the store is back."
    )
    store_down_at_start: str = (
        "The conversation store cannot be reached just now, so this conversation is not "
        "saved; reload the page once it is back to continue the saved one."
    )
    foreign_page: str = (
        "This chat works only on its own page: this page is from another site, so it gets "
        "no conversation here."
    )
    agent_not_started: str = (
        "The agent could not be started ({error}). The server log has the details."
    )
    # Notes as a run ends, or while it waits.
    stopped: str = "Stopped."
    stopped_request_limit: str = "Stopped: the request limit for one run was reached."
    stopped_tool_call_limit: str = "Stopped: the tool-call limit for one run was reached."
    stopped_input_token_limit: str = "Stopped: the input-token limit was reached."
    stopped_output_token_limit: str = "Stopped: the output-token limit was reached."
    stopped_total_token_limit: str = "Stopped: the token limit was reached."
    stopped_cost_limit: str = "Stopped: the cost limit was reached."
    stopped_cost_unavailable: str = (
        "Stopped: the provider reports no cost, so the cost limit can't be kept."
    )
    stopped_tool_loop: str = "Stopped: the model kept repeating the same tool call."
    stopped_by_hook: str = "Stopped by a hook."
    stopped_budget: str = "Stopped: the budget is spent."
    stopped_because: str = "Stopped: {reason}."
    model_request_failed: str = "The model request failed."
    model_request_failed_because: str = "The model request failed: {error}"
    run_failed: str = "The run failed."
    run_failed_because: str = "The run failed: {error}"
    retrying: str = "{error} — retrying ({attempt} of {attempts})…"
    warning: str = "Warning: {message}"
    still_waiting: str = "Still waiting for {host} ({seconds} s)… Stop to give up"
    still_waiting_rest: str = (
        "Still waiting for the rest of the reply from {host} ({seconds} s)… Stop to give up"
    )
    stopped_card_title: str = "Stopped: {tool}"
    stopped_card_output: str = "Stopped: the run ended before this call finished."
    # Daily budgets (KitPersistence(budget=)): the refusal, and the usage line's part.
    budget_unknown: str = (
        "Your daily budget cannot be checked just now (the store cannot be reached), so "
        "nothing was sent; try again in a moment."
    )
    budget_spent: str = "Your daily budget is spent ({amount} today); it renews at midnight UTC."
    budget_spent_anonymous: str = (
        "The daily budget of visitors who are not signed in is spent ({amount} today); it "
        "renews at midnight UTC."
    )
    budget_requests: str = "{spent} of {limit} requests"
    budget_tokens: str = "{spent} of {limit} tokens"
    budget_cost: str = "${spent} of ${limit}"
    budget_today: str = "Today: {amounts}"
    # The usage line under the chat.
    usage_line: str = (
        "Requests: {requests} · Tokens: {tokens} · Tool calls: {tool_calls} · Cost: {cost}"
    )
    # The state badges of the MCP and subagent panels (by the state they show).
    state_not_connected: str = "not connected"
    state_connecting: str = "connecting"
    state_connected: str = "connected"
    state_failed: str = "failed"
    state_closed: str = "closed"
    state_running: str = "running"
    state_queued: str = "queued"
    state_completed: str = "completed"
    state_stopped: str = "stopped"
    state_suspended: str = "suspended"
    state_not_started: str = "not_started"
    # The rating under each reply (agent_chat_ui(feedback=True)).
    feedback_group: str = "Rate this reply"
    feedback_good: str = "Good reply"
    feedback_bad: str = "Bad reply"
    feedback_comment: str = "Comment (optional)"
    feedback_send: str = "Send comment"
    feedback_saved: str = "Thanks: your feedback is saved."
    # The history drawer (saved conversations).
    switch_confirm_title: str = "Switch conversations?"
    stop_first_body: str = "The agent is working on a reply: it is stopped first."
    stop_first_button: str = "Stop and continue"
    capped_one: str = (
        "You can keep {limit} conversations here, so the oldest one ({titles}) was deleted."
    )
    capped_many: str = (
        "You can keep {limit} conversations here, so the oldest ones ({titles}) were deleted."
    )
    # Editing a past message, and its versions (‹ ›).
    not_editable: str = "This message never reached the agent, so it cannot be edited."
    edit_length: str = "An edited message needs 1 to {limit} characters."
    edit_failed: str = "The message could not be edited"
    edit_title: str = "Edit this message?"
    edit_button: str = "Edit and rerun"
    edit_body: str = (
        "{files}. They go back to how they were when this message was first sent, and the "
        "conversation continues from the edited message. The conversation as it is stays "
        "one step away (‹ ›), with its files."
    )
    edit_no_checkpoint: str = "The files were not rewound: this message has no checkpoint."
    edit_no_attachments: str = "Attachments are not sent again with an edited message."
    version_failed: str = "The other version could not be opened"
    version_title: str = "Open this version?"
    version_button: str = "Open"
    version_body: str = (
        "{files}. The files go back to how this version left them; the current one stays "
        "one step away (‹ ›), with its files."
    )
    files_restored_one: str = "1 file restored: {names}"
    files_restored_many: str = "{count} files restored: {names}"
    files_more: str = " and {count} more"
    # The conversation panel.
    new_conversation: str = "New conversation"
    download_conversation: str = "Download conversation"
    download_markdown: str = "Markdown"
    download_json: str = "JSON"
    rewind_heading: str = "Rewind files"
    rewind: str = "Rewind"
    checkpoint_run: str = "Start of run {number}"
    checkpoint: str = "Checkpoint"
    changes_after_none: str = "no file changes after it"
    changes_after_one: str = "1 file change after it"
    changes_after_many: str = "{count} file changes after it"
    no_checkpoints: str = "No file changes to rewind: each run that changes files is listed here."
    more_checkpoints: str = "{count} more"
    rewind_confirm_title: str = "Rewind files?"
    rewind_confirm_body: str = (
        "The files the agent wrote or edited since this checkpoint go back to how "
        "they were then (files it created are deleted), and later checkpoints are "
        "dropped. The conversation stays as it is."
    )
    rewound_one: str = "Rewound: 1 file change undone."
    rewound_many: str = "Rewound: {count} file changes undone."
    rewind_refused: str = "Rewind refused: {error}"
    new_confirm_title: str = "Start a new conversation?"
    new_confirm_body: str = "{files}"
    new_files_kept: str = (
        "This one stays in your conversations (the history drawer), with its files."
    )
    new_files_deleted: str = (
        "The chat and its file checkpoints are cleared, and this session's workspace and "
        "its files are deleted."
    )
    new_confirm_button: str = "Start anew"
    agent_working: str = "The agent is working: stop it first."
    # The MCP panel.
    mcp_connect: str = "Connect"
    mcp_disconnect: str = "Disconnect"
    mcp_none: str = "No MCP servers are configured."
    mcp_tools: str = "{count} tools"
    mcp_refused: str = "Refused (the agent already has these names): {names}"
    # The subagent (team) panel.
    subagents_denied: str = "You may not see this agent's delegations."
    subagents_none: str = "No delegations yet."
    subagents_no_agent: str = "There is no agent in this session yet."
    subagent_from_saved: str = "From the saved conversation."
    subagent_transcript: str = "Transcript"
    subagent_hide_transcript: str = "Hide transcript"
    subagent_stop: str = "Stop"
    subagent_transcript_empty: str = "Nothing yet."
    subagent_usage: str = "{requests} requests · {tokens} tokens"
    subagent_calls: str = "{role} calls {tool}"
    subagent_result: str = "{tool} result"
    subagent_result_error: str = "{tool} result (error)"
    # The permission-mode select.
    mode_label: str = "Permission mode"
    mode_standard: str = "Standard"
    mode_readonly: str = "Read-only"
    mode_plan: str = "Plan"
    mode_full: str = "Full"
    mode_hint_one: str = "The mode only narrows during a session: {modes} is no longer offered."
    mode_hint_many: str = "The mode only narrows during a session: {modes} are no longer offered."
    mode_names_and: str = "{first} and {last}"

    @field_validator("*")
    @classmethod
    def _check_placeholders(cls, text: str, info: ValidationInfo) -> str:
        wanted = PLACEHOLDERS.get(info.field_name or "")
        if wanted:  # a string without values is no template: shown as written
            _check(text, wanted)
        return text

    def state_word(self, state: str) -> str:
        """The badge's word for a panel's ``state`` (an unknown one as it is).

        Examples:
            >>> KitStrings(state_running="läuft").state_word("running")
            'läuft'
            >>> DEFAULT_STRINGS.state_word("not connected"), DEFAULT_STRINGS.state_word("?")
            ('not connected', '?')
        """
        word = getattr(self, "state_" + state.replace(" ", "_"), None)
        return word if isinstance(word, str) else state

    def feedback_words(self) -> str:
        """The rating's words as JSON, for the page's script (it shows them as text).

        Examples:
            >>> import json
            >>> json.loads(KitStrings(feedback_good="Gut").feedback_words())["good"]
            'Gut'
        """
        names = ("group", "good", "bad", "comment", "send", "saved")
        return json.dumps({name: getattr(self, f"feedback_{name}") for name in names})

    def format(self, name: str, **values: Any) -> str:
        """Field ``name`` with its placeholders filled in from ``values``.

        Examples:
            >>> KitStrings().format("approval_title", tool="<b>")
            'Allow <b>?'
        """
        text: str = getattr(self, name)
        return text.format(**values)


def _check(text: str, wanted: frozenset[str]) -> None:
    """``text`` uses exactly the placeholders ``wanted``, each a plain name: no index,
    attribute or format spec (``{tool.__class__}`` would read objects' insides)."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(
            f"not a valid template ({exc}); write {{{{ and }}}} for a literal brace"
        ) from None
    used: set[str] = set()
    for _literal, field, spec, conversion in parts:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ValueError(
                f"{{{field}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not a placeholder; use a plain name "
                f"like {{{sorted(wanted)[0] if wanted else 'name'}}}, or {{{{ and }}}} "
                f"for a literal brace"
            )
        used.add(field)
    unknown = used - wanted
    if unknown:
        allowed = ", ".join(f"{{{n}}}" for n in sorted(wanted)) or "none"
        raise ValueError(
            f"unknown placeholder {{{sorted(unknown)[0]}}} "
            f"(it may use: {allowed}); write {{{{ and }}}} for a literal brace"
        )
    missing = wanted - used
    if missing:
        has = ", ".join(f"{{{n}}}" for n in sorted(used)) or "none"
        raise ValueError(
            f"must use the placeholder {{{sorted(missing)[0]}}} (it has {has}); "
            f"write {{{{ and }}}} for a literal brace"
        )


DEFAULT_STRINGS = KitStrings()
"""The kit's English: what every part uses when the app passes no strings."""
