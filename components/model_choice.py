"""Which model the reference app talks to: ``DEPUTY_MODEL``, else the offline demo.

The choice is made once per process. With ``DEPUTY_MODEL`` unset it is known at once
(the demo). With it set, the provider's API key must be checked, and that needs
litellm, which takes seconds to import: :class:`ModelCheck` does it in a worker thread
at app start (warming litellm up for every session at the same time). Until it
finishes, :meth:`ModelCheck.current` answers with the requested model, marked
unchecked, and never blocks.

Examples:
    >>> check = ModelCheck(chosen_model({}))  # .start() would begin the warm-up thread
    >>> choice = check.current()
    >>> choice.model, choice.is_demo, choice.checked
    ('deputy/demo', True, True)
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from htmltools import Tag, TagList, tags
from shiny import Inputs, reactive, ui

from deputy_shiny import DEMO_MODEL, ChatModel, DeputyError, warm_up
from deputy_shiny.models import missing_credentials

logger = logging.getLogger(__name__)

__all__ = [
    "ModelCheck",
    "ModelChoice",
    "chosen_model",
    "decide",
    "demo_banner",
    "model_summary",
    "page_follows_check",
    "track_model_choice",
]


def chosen_model(environ: Mapping[str, str] | None = None) -> str:
    """The litellm model string from ``DEPUTY_MODEL``, or ``deputy/demo`` when unset.

    Examples:
        >>> chosen_model({})
        'deputy/demo'
        >>> chosen_model({"DEPUTY_MODEL": "openai/gpt-4.1-mini"})
        'openai/gpt-4.1-mini'
    """
    env = os.environ if environ is None else environ
    return env.get("DEPUTY_MODEL", "").strip() or DEMO_MODEL


@dataclass(frozen=True)
class ModelChoice:
    """The model sessions use, and why.

    Attributes:
        requested: What ``DEPUTY_MODEL`` asked for (``deputy/demo`` when unset).
        model: The model in use: ``requested``, or the demo when it can't be used.
        checked: False while the API key check is still running.
        reason: Why the demo runs instead of ``requested`` (None when it doesn't).

    Examples:
        >>> ModelChoice("openai/gpt-4.1-mini", DEMO_MODEL, True, "no key").is_demo
        True
    """

    requested: str
    model: str
    checked: bool
    reason: str | None = None

    @property
    def is_demo(self) -> bool:
        """True when sessions run on the offline demo model."""
        return self.model == DEMO_MODEL


def decide(
    requested: str, missing: Callable[[ChatModel], list[str]] = missing_credentials
) -> ModelChoice:
    """Check ``requested`` and fall back to the demo when it can't be used.

    ``missing`` finds the provider's missing key variables (it imports litellm:
    call this in a worker thread).

    Examples:
        >>> decide("openai/gpt-4.1-mini", lambda m: ["OPENAI_API_KEY"]).reason.split(":")[0]
        'DEPUTY_MODEL is openai/gpt-4.1-mini, but OPENAI_API_KEY is not set'
        >>> decide("openai/gpt-4.1-mini", lambda m: []).model
        'openai/gpt-4.1-mini'
        >>> choice = decide("not a model!", lambda m: [])
        >>> choice.model, "not a litellm model string" in choice.reason
        ('deputy/demo', True)
    """
    if requested == DEMO_MODEL:
        return ModelChoice(requested, DEMO_MODEL, True)
    try:
        model = ChatModel(model=requested)
    except (DeputyError, ValueError):
        reason = (
            f"DEPUTY_MODEL is {requested!r}, which is not a litellm model string "
            "(like openai/gpt-4.1-mini)."
        )
        return ModelChoice(requested, DEMO_MODEL, True, reason)
    keys = missing(model)
    if keys:
        names = " or ".join(keys)
        verb = "is" if len(keys) == 1 else "are"
        reason = (
            f"DEPUTY_MODEL is {requested}, but {names} {verb} not set: set it and restart the app."
        )
        return ModelChoice(requested, DEMO_MODEL, True, reason)
    return ModelChoice(requested, requested, True)


class ModelCheck:
    """The app's model choice, checked in a worker thread that also warms litellm up."""

    def __init__(self, requested: str) -> None:
        self._requested = requested
        self._done = threading.Event()
        self._choice = ModelChoice(requested, requested, requested == DEMO_MODEL)

    def start(self) -> ModelCheck:
        """Start the thread that imports litellm and then checks the model's API key."""
        threading.Thread(target=self._run, name="litellm-warm-up", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            warm_up()
            if self._requested != DEMO_MODEL:
                self._choice = decide(self._requested)
        except Exception:  # a broken check must not take the app down: say so, use the demo
            logger.exception("Checking DEPUTY_MODEL failed; running on the demo model")
            self._choice = ModelChoice(
                self._requested,
                DEMO_MODEL,
                True,
                f"Checking DEPUTY_MODEL ({self._requested}) failed; see the server log.",
            )
        finally:
            self._done.set()

    def current(self) -> ModelChoice:
        """The choice so far (never blocks): the requested model, unchecked, until known."""
        return self._choice

    @property
    def settled(self) -> bool:
        """True once the check has finished: :meth:`current` will not change again.

        Examples:
            >>> ModelCheck("deputy/demo").settled  # not started
            False
        """
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> ModelChoice:
        """Wait for the check (scripts and tests only: never on the event loop).

        Examples:
            >>> ModelCheck("deputy/demo").wait(0).checked
            True
        """
        if not self._choice.checked:
            self._done.wait(timeout)
        return self._choice


def demo_banner(choice: ModelChoice) -> Tag | None:
    """The visible notice that replies are scripted, when the demo runs; else None.

    Examples:
        >>> "not from an LLM" in str(demo_banner(ModelChoice(DEMO_MODEL, DEMO_MODEL, True)))
        True
    """
    if not choice.is_demo:
        return None
    how = choice.reason or (
        "Set DEPUTY_MODEL (and the provider's API key) to chat with a real model."
    )
    return ui.div(
        ui.strong("Offline demo model. "),
        "Replies are scripted, not from an LLM. ",
        how,
        class_="alert alert-info deputy-banner",
        role="status",
    )


def model_summary(choice: ModelChoice) -> TagList:
    """The sidebar's model section: the model string and what it is.

    Examples:
        >>> "Checking" in str(model_summary(ModelChoice("openai/gpt-4o", "openai/gpt-4o", False)))
        True
    """
    if choice.is_demo:
        note = "Offline demo: scripted replies, no LLM, no network."
    elif not choice.checked:
        note = "Checking the provider's API key…"
    else:
        note = "Through litellm, with the provider's API key."
    return TagList(
        tags.code(choice.model, class_="deputy-model-name"),
        tags.div(note, class_="deputy-model-note"),
    )


def page_follows_check(check: ModelCheck, input: Inputs, output_id: str = "banner") -> bool:
    """Whether this session must keep its page in step with ``check`` (call it in the
    server function, before :func:`track_model_choice`).

    A page built once the check had settled shows the final choice as plain markup and
    needs nothing more; following the check costs every idle session a few reactive
    objects it would keep for its whole life. A page built while the check ran has the
    output ``output_id`` instead (see ``app_ui``), and its browser says so as the
    session starts (Shiny's ``.clientdata_output_<id>_hidden``): that session follows.

    Examples:
        >>> from shiny.session import Inputs
        >>> pending_page = Inputs({})
        >>> pending_page[".clientdata_output_banner_hidden"]._set(False)
        True
        >>> checking = ModelCheck("deputy/demo")  # not started: still checking
        >>> page_follows_check(checking, pending_page), page_follows_check(checking, Inputs({}))
        (True, True)
    """
    if not check.settled:
        return True
    with reactive.isolate():
        return f".clientdata_output_{output_id}_hidden" in input


def track_model_choice(
    check: ModelCheck, apply: Callable[[ModelChoice], bool]
) -> reactive.Value[ModelChoice]:
    """This session's view of the model choice, updated once the check finishes.

    Call it in a server function. Until the check is done it looks again every quarter
    second (without blocking: never an ``await`` on the reactive lock); then it calls
    ``apply(choice)`` until that returns True (say, False while the agent is running)
    and stops.
    """
    # Named: an unnamed Value walks inspect.stack() (ARCHITECTURE rule 11).
    value = reactive.value(check.current(), name="deputy_model_choice")

    @reactive.effect
    def _follow() -> None:
        choice = check.current()
        with reactive.isolate():
            if choice != value.get():
                value.set(choice)
        if not choice.checked or not apply(choice):
            reactive.invalidate_later(0.25)
            return
        _follow.destroy()

    return value
