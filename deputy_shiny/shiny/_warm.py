"""Warm litellm up as the app starts, so the first user's first reply is not the slow one.

Importing litellm takes seconds. The library imports it lazily, on the first model
request, so without this the first user of a fresh process waits for the import too.
The kit starts the import in a worker thread the first time the app builds the chat's
UI or binds its server, which is as the app starts: a static UI is built when
``app.py`` is imported, an Express app's on its first session. An app need not call
:func:`deputy_shiny.warm_up` itself.

A UI built with no event loop running is an app module being imported (``shiny run``
and Posit Connect import it before they serve): there the kit waits for the warm-up
(:func:`warm_up_before_serving`), so the process starts answering once its first
reply is as fast as any other. litellm's import alone takes 4 s of CPU here: a user
who opens the page sooner would otherwise wait that long for the first token. On a
running loop (a UI function called per request, an Express session) it never waits.

Examples:
    >>> from deputy_shiny.shiny._warm import warm_up_in_background
    >>> thread = warm_up_in_background()
    >>> thread is warm_up_in_background()  # once a process
    True
"""

from __future__ import annotations

import asyncio
import logging
import threading

from ..models._litellm import warm_up

__all__ = ["warm_up_before_serving", "warm_up_in_background"]

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_thread: threading.Thread | None = None

IMPORT_WAIT = 120.0
"""Seconds an app's import waits for the warm-up at most (a cold, busy machine)."""


def _warm() -> None:
    try:
        warm_up()
    except Exception:  # the first request imports it again, and says what is wrong
        _log.warning("Importing litellm in the background failed", exc_info=True)


def warm_up_in_background() -> threading.Thread:
    """Start importing litellm in a daemon thread, once a process; returns that thread."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_warm, name="deputy-shiny-warm-up", daemon=True)
            _thread.start()
        return _thread


def warm_up_before_serving() -> None:
    """Start the warm-up; while an app module is imported (no loop running), finish it.

    Examples:
        >>> from deputy_shiny.shiny._warm import warm_up_before_serving
        >>> warm_up_before_serving()  # at an app's import: returns once litellm is warm
    """
    thread = warm_up_in_background()
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # an import, not a request: nobody is waiting on this thread
        thread.join(IMPORT_WAIT)
