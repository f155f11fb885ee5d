"""Warm litellm up as the app starts, so the first user's first reply is not the slow one.

Importing litellm takes seconds. The library imports it lazily, on the first model
request, so without this the first user of a fresh process waits for the import too.
The kit starts the import in a worker thread the first time the app builds the chat's
UI or binds its server, which is as the app starts: a static UI is built when
``app.py`` is imported, an Express app's on its first session. An app need not call
:func:`deputy_shiny.warm_up` itself.

Example:
    >>> from deputy_shiny.shiny._warm import warm_up_in_background
    >>> thread = warm_up_in_background()
    >>> thread is warm_up_in_background()  # once a process
    True
"""

from __future__ import annotations

import logging
import threading

from ..models._litellm import warm_up

__all__ = ["warm_up_in_background"]

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_thread: threading.Thread | None = None


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
