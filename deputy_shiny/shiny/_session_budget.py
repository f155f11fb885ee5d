"""One session's daily budget, the engine's request gate: :class:`SessionBudget`.

Every model request made for a session passes :meth:`SessionBudget.reserve` before it
is sent, whichever agent makes it: the chat's agent, its subagents and retained
agents, compaction summaries, structured-output corrections, retries and fallbacks
(the kit runs each stream under :func:`~deputy_shiny.usage.charged_to`). A request is
charged to each of the session's accounts with one counter add in the store (atomic:
two processes never both pass a request limit; the accounts' adds go at once), and is
refused, uncharged again, when an account is past a limit. Its tokens and cost are
known only as it ends (:meth:`~SessionBudget.settle`, on the event loop, only takes
note): they go with the next request's add, or with :meth:`~SessionBudget.flush` as the
run ends.

The accounts (:func:`session_budget`): a signed-in user's (or a custom key's) own; a
browser known only by its token draws on its own and on the anonymous visitors'
shared one; a session that is not saved and has no identity at all, on the shared one
only. When the store cannot be reached, nothing is sent (fail closed).

Examples:
    >>> import asyncio, tempfile
    >>> from deputy_shiny.persistence import FileStore
    >>> from deputy_shiny.shiny import UserBudget
    >>> from deputy_shiny.shiny._kit_store import KitStore
    >>> from deputy_shiny.usage import TurnUsage
    >>> link = KitStore(FileStore(tempfile.mkdtemp(), key=b"a key only this server holds"))
    >>> gate = SessionBudget(link, [account("alice", UserBudget(max_requests_per_day=1))])
    >>> async def day():
    ...     first = await gate.reserve()
    ...     gate.settle(TurnUsage(input_tokens=7, output_tokens=3))
    ...     return first, await gate.reserve(), await gate.flush()
    >>> asyncio.run(day())  # doctest: +NORMALIZE_WHITESPACE
    (None, 'Your daily budget is spent (1 of 1 requests today); it renews at midnight UTC.',
     'Today: 1 of 1 requests')
    >>> link.close()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from shiny.session import Session

from ..errors import DeputyError
from ..usage import TurnUsage
from ._budget import (
    DailyAllowance,
    budget_day,
    budget_line,
    budget_refusal,
    budget_user,
)
from ._conversations import KitPersistence, kit_store
from ._kit_store import KitStore
from ._session_conversation import SessionConversation, _NotSaved, resolve_user
from ._strings import DEFAULT_STRINGS, KitStrings

logger = logging.getLogger(__name__)

__all__ = ["BUDGET_UNKNOWN_MESSAGE", "SessionBudget", "account", "session_budget"]

BUDGET_UNKNOWN_MESSAGE = DEFAULT_STRINGS.budget_unknown

ANONYMOUS = budget_user("anonymous", "everyone")
"""The counters every anonymous visitor of the deployment draws on together."""


@dataclass(eq=False)
class _Account:
    """Counters a session draws on: their name in the store, and their allowance."""

    name: str
    allowance: DailyAllowance
    anonymous: bool = False  # the visitors' shared allowance (its note says so)
    pending: dict[str, float] = field(default_factory=dict)  # tokens and cost not charged yet


def account(user: str, allowance: DailyAllowance, *, anonymous: bool = False) -> _Account:
    """The counters of ``user`` (a :func:`~._budget.budget_user` name), held to
    ``allowance``."""
    return _Account(user, allowance, anonymous)


class SessionBudget:
    """One session's accounts in the store, as a :class:`~deputy_shiny.usage.RequestGate`.

    Args:
        link: The store the counters are in (None: it cannot be opened, so every
            request is refused).
        accounts: What each request draws on, the first one's line shown to the user.
    """

    strings: KitStrings = DEFAULT_STRINGS
    """The words of its notes (the app's ``KitStrings``; the chat module sets them)."""

    def __init__(self, link: KitStore | None, accounts: Sequence[_Account]) -> None:
        self._link = link
        self._accounts = tuple(accounts)

    async def _add(self, user: str, amounts: dict[str, float]) -> dict[str, float]:
        if self._link is None:
            raise DeputyError("the budget's store could not be opened")
        day = budget_day()
        return await self._link.run(lambda store: store.add_usage(user, day, amounts))

    async def check(self) -> str | None:
        """Before a run: the note that refuses it (a limit is reached, or the budget
        cannot be checked), else None. Charges nothing."""
        for held in self._accounts:
            try:
                totals = await self._totals(held.name)
            except (DeputyError, OSError) as exc:
                logger.warning("the budget could not be checked: %s", exc)
                return self.strings.budget_unknown
            note = self._refusal(held, totals)
            if note is not None:
                return note
        return None

    async def _totals(self, user: str) -> dict[str, float]:
        if self._link is None:
            raise DeputyError("the budget's store could not be opened")
        day = budget_day()
        return await self._link.run(lambda store: store.usage_totals(user, day))

    async def reserve(self) -> str | None:
        """Charge one request to every account at once (with what earlier ones cost),
        or refuse it: a limit is reached (the request is uncharged again), or the store
        cannot be reached."""
        results = await asyncio.gather(*(self._charge_request(held) for held in self._accounts))
        notes = [note for _, note in results if note is not None]
        if not notes:
            return None
        unknown = self.strings.budget_unknown
        for held, note in results:
            if note != unknown:  # charged: it is not sent, so it is theirs again
                try:
                    await self._add(held.name, {"requests": -1.0})
                except (DeputyError, OSError) as exc:
                    logger.warning("a refused request stays charged: %s", exc)
        return unknown if unknown in notes else notes[0]

    async def _charge_request(self, held: _Account) -> tuple[_Account, str | None]:
        """One request charged to ``held``: the note that refuses it, if any."""
        taken, held.pending = held.pending, {}
        try:
            totals = await self._add(held.name, {"requests": 1.0, **taken})
        except (DeputyError, OSError) as exc:
            logger.warning("a request could not be charged to the budget: %s", exc)
            _merge(held.pending, taken)  # charged with a later request
            return held, self.strings.budget_unknown
        before = {**totals, "requests": totals.get("requests", 0.0) - 1.0}
        return held, self._refusal(held, before)

    def _refusal(self, held: _Account, totals: dict[str, float]) -> str | None:
        return budget_refusal(
            held.allowance, totals, anonymous=held.anonymous, strings=self.strings
        )

    def settle(self, usage: TurnUsage) -> None:
        """A request ended: its tokens and cost, charged with the next request (or
        :meth:`flush`)."""
        spent = {"tokens": float(usage.input_tokens + usage.output_tokens)}
        spent["cost"] = float(usage.cost or 0.0)
        for held in self._accounts:
            _merge(held.pending, spent)

    async def flush(self) -> str | None:
        """Charge what ended requests cost (as a run ends); today's spend against the
        first account's allowance, for the usage line (None: the store cannot be
        reached now, and what is not charged yet waits for the next request)."""
        line: str | None = None
        for held in self._accounts:
            taken, held.pending = held.pending, {}
            try:
                totals = await (self._add(held.name, taken) if taken else self._totals(held.name))
            except (DeputyError, OSError) as exc:
                logger.warning("a run's usage could not be charged yet: %s", exc)
                _merge(held.pending, taken)
                return None
            if line is None:
                line = budget_line(held.allowance, totals, self.strings)
        return line


def _merge(into: dict[str, float], amounts: dict[str, float]) -> None:
    for metric, amount in amounts.items():
        if amount:
            into[metric] = into.get(metric, 0.0) + amount


def session_budget(
    persistence: KitPersistence | None,
    session: Session,
    conversation: SessionConversation | None,
) -> SessionBudget | None:
    """The budget a session's requests are charged to (None without one): its user's,
    and the anonymous visitors' one when it has no identity of its own, saved or not."""
    budget = None if persistence is None else persistence.budget
    if persistence is None or budget is None:
        return None
    try:
        link = kit_store(persistence, for_budget=True)
    except (DeputyError, OSError) as exc:
        logger.warning("the budget's store cannot be opened: %s", exc)
        link = None
    shared = account(ANONYMOUS, budget.anonymous_allowance(), anonymous=True)
    if conversation is not None:
        kind, user = conversation.kind, conversation.budget_user
    else:
        try:  # the same answer its conversation got (a token issued is remembered)
            found = resolve_user(persistence, session)
        except _NotSaved:
            return SessionBudget(link, [shared])  # nobody to tell: the shared one only
        kind, user = found.kind, budget_user(found.kind, found.key)
    own = account(user, budget)
    return SessionBudget(link, [own, shared] if kind == "token" else [own])
