"""What the agent asks one browser session's user: approvals and ask_user questions.

Both go through the session's modal queue (:mod:`._prompts`) and wait inside the
stream task, never inside a reactive effect (Shiny has one reactive lock for the whole
process). :class:`SessionAsks` is built before the agent exists: its
:meth:`~SessionAsks.approval_handler` and :meth:`~SessionAsks.ask_user` are what the
``agent_factory`` receives in its context.
"""

from __future__ import annotations

from typing import Any

from ..approvals import ApprovalDecision, ApprovalRequest, new_request_id
from ..tools.interactive import AskUserContext, AskUserDeclined, Question
from ._answers import decision_from_answer
from ._modals import approval_modal, questions_modal
from ._prompts import ModalFactory, PromptClosed, SessionPrompts
from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = ["SessionAsks"]


class SessionAsks:
    """Approvals and questions of one browser session, as modals in its queue.

    Args:
        prompts: The session's modal queue.
        wait_seconds: How long a prompt may wait (None: as long as the session lasts).
        chat: The asking chat's name (the app's ``label``), shown in its modals.
        strings: The words of its modals (the app's ``KitStrings``).
        default_name: The name shown when ``chat`` is None (the module id), but only
            while several chats share the session's queue: with one chat on the page,
            "Asked by chat" says nothing.

    Examples:
        >>> SessionAsks.__name__
        'SessionAsks'
    """

    def __init__(
        self,
        prompts: SessionPrompts,
        wait_seconds: float | None,
        chat: str | None = None,
        strings: KitStrings = DEFAULT_STRINGS,
        *,
        default_name: str | None = None,
    ) -> None:
        self.prompts = prompts
        self.wait_seconds = wait_seconds
        self._label = chat
        self._default_name = default_name
        self.strings = strings
        if default_name is not None:
            prompts.chats.add(default_name)
        # This chat's prompts now waiting: the page's other chats share the queue, and
        # this chat's stop button ends only its own.
        self.waiting: set[str] = set()

    @property
    def chat(self) -> str | None:
        """The asker line's name: the label, else the module id when the page has several
        chats (read as each modal is drawn, so a chat added later is counted)."""
        if self._label is not None:
            return self._label
        return self._default_name if len(self.prompts.chats) > 1 else None

    async def _ask(
        self,
        request_id: str,
        modal: ModalFactory,
        group: str | None,
        also_waiting: int = 0,
    ) -> dict[str, Any]:
        self.waiting.add(request_id)
        try:
            return await self.prompts.ask(
                request_id,
                modal,
                self.wait_seconds,
                group=group,
                also_waiting=also_waiting,
                strings=self.strings,
            )
        finally:
            self.waiting.discard(request_id)

    def stop(self) -> int:
        """The chat's stop button: answer every prompt this chat is waiting on with
        ``"stop"`` (an approval is then denied and its run ends; a question declined),
        and close their modals. Returns how many were waiting."""
        return self.prompts.stop(self.waiting)

    async def approval(self, request: ApprovalRequest) -> dict[str, Any]:
        """The modal's answer to ``request``.

        Raises:
            TimeoutError: nobody answered in time.
            PromptClosed: the session ended first.
        """
        return await self._ask(
            request.request_id,
            lambda waiting: approval_modal(request, waiting, self.chat, self.strings),
            request.run_id,
            request.calls_after,
        )

    async def approval_handler(self, request: ApprovalRequest) -> ApprovalDecision:
        """The agent's ``approval_handler`` (without persistence): the user decides."""
        try:
            answer = await self.approval(request)
        except PromptClosed:
            return ApprovalDecision.deny("The user left before deciding.")
        return decision_from_answer(request, answer)

    async def ask_user(self, questions: list[Question], context: AskUserContext) -> list[Any]:
        """The ``ask_user`` callback: the answers, in question order.

        Raises:
            AskUserDeclined: the user cancelled, did not answer in time, or left.
        """
        request_id = new_request_id()
        try:
            answer = await self._ask(
                request_id,
                lambda waiting: questions_modal(
                    request_id, questions, waiting, self.chat, self.strings
                ),
                context.run_id,
            )
        except (PromptClosed, TimeoutError):
            raise AskUserDeclined("The user did not answer.") from None
        if answer.get("action") != "submit":
            raise AskUserDeclined("The user cancelled.")
        answers = answer.get("answers")
        return answers if isinstance(answers, list) else []
