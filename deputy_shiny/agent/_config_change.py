"""Hooks an agent fires outside a run: ``ConfigChange`` (and its ``Notification``) when
``set_permission_mode`` or ``set_model`` changes the configuration at runtime.

These methods are synchronous, and may be called from a script, from a worker thread or
from the event loop itself (a Shiny input's effect, a tool during a run). So the hooks run
at once, on the calling thread's private loop, when no event loop runs there; inside a
running loop they run in a task of their own, which the method never waits for (an
``await`` in a Shiny effect would stall every user). The agent holds those tasks until
they end (and nothing else does), in a fresh context, so a session's context is not kept
alive by a hook that is slow to return.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from .._util import sync as _sync
from ..hooks import HookContext, HookRegistry, HookRun

__all__ = ["HookFirer"]

logger = logging.getLogger(__name__)


class HookFirer:
    """Fires an agent's hooks outside a run (one per agent; see the module docs).

    Examples:
        >>> from deputy_shiny.hooks import HookMatcher
        >>> seen = []
        >>> hooks = HookRegistry([HookMatcher("ConfigChange", lambda c: seen.append(c.details))])
        >>> firer = HookFirer(hooks, lambda: {"agent_id": "agent_1", "session_id": "session_1"})
        >>> firer.config_change("model", "openai/a", "openai/b")
        >>> seen
        [{'key': 'model', 'old_value': 'openai/a', 'new_value': 'openai/b'}]
    """

    __slots__ = ("_fields", "_hooks", "_tasks")

    def __init__(
        self,
        hooks: HookRegistry,
        fields: Callable[[], Mapping[str, Any]],
    ) -> None:
        self._hooks = hooks
        self._fields = fields  # the HookContext fields of the agent as it is now
        self._tasks: set[asyncio.Task[Any]] = set()

    def config_change(self, key: str, old_value: Any, new_value: Any) -> None:
        """``ConfigChange`` with ``key``, ``old_value`` and ``new_value`` in its details."""
        if old_value == new_value:
            return
        self.fire("ConfigChange", {"key": key, "old_value": old_value, "new_value": new_value})

    def notify(self, code: str, message: str, level: str = "info", **details: Any) -> None:
        """``Notification`` with ``message``, ``level`` and ``code`` in its details."""
        self.fire("Notification", {"message": message, "level": level, "code": code, **details})

    def fire(self, event: str, details: Mapping[str, Any]) -> None:
        """Run ``event``'s hooks now (no loop here) or in a task (inside a running loop)."""
        if not self._hooks.matchers(event):
            return
        context = HookContext(event=event, details=details, **self._fields())
        run = self._hooks.run(event, context=context)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _logged(_sync.run_sync(run, event))
            return
        task = loop.create_task(_run_logged(run), context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait for the hooks still running in tasks (tests; an app need not call it)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _run_logged(run: Coroutine[Any, Any, HookRun]) -> None:
    _logged(await run)


def _logged(run: HookRun) -> None:
    if run.failure is not None:
        logger.warning("%s hook failed: %s", run.event, run.failure)
