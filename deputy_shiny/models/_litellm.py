"""Lazy, offline-safe access to litellm, and the registry of our custom providers.

litellm takes seconds to import and, unless told otherwise, fetches a price list over
the network at import. So nothing imports it at module level: :func:`get_litellm`
imports it once (thread-safe), with the local cost map and debug output off, and
installs the custom providers (test models, the demo model) registered before then.
Apps call :func:`warm_up` in a worker thread at start so no user pays the import on
the event loop (nor the package's deferred pydantic validators, which it builds too).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from .._util.config import complete_deferred_models

logger = logging.getLogger(__name__)

# Two locks: the import holds ``_import_lock`` for its seconds; the provider tables are
# ``_lock``'s, held for microseconds. So a session registering a test or demo model on
# the event loop while the kit's warm-up thread imports litellm does not wait for the
# import (its provider is installed when the import ends).
_import_lock = threading.Lock()
_lock = threading.RLock()
_module: ModuleType | None = None

# provider name -> factory(litellm module) -> CustomLLM instance. Factories rather than
# instances, because a CustomLLM subclass can only be defined once litellm is imported.
_pending: dict[str, Callable[[ModuleType], Any]] = {}
_installed: dict[str, Any] = {}
_forgotten: deque[str] = deque()
# What a registered provider says its models cannot take (litellm's check names, such
# as "supports_vision"): a test model without vision answers like a real one.
_lacking: dict[str, frozenset[str]] = {}
# Marks the custom_provider_map entries we own, so foreign entries are left alone.
_MARK = "deputy_shiny"


def get_litellm() -> ModuleType:
    """Return the litellm module, importing and configuring it on first use."""
    global _module
    if _module is not None:
        if _forgotten:  # providers of garbage-collected test models
            with _lock:
                _drain_forgotten()
        return _module
    with _import_lock:
        if _module is None:
            # Must be set before import: otherwise litellm downloads its cost map.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            os.environ.setdefault("LITELLM_LOG", "ERROR")
            import litellm

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            # We own fallbacks and retries; litellm must not silently retry or drop params.
            litellm.num_retries = 0
            with _lock:  # a registration sees either _module unset, or its provider installed
                _module = litellm
                for name, factory in list(_pending.items()):
                    _install(name, factory)
                _pending.clear()
    assert _module is not None
    return _module


# litellm's hooks an app can register; while all are empty (and no cache is set), the
# work litellm does at the end of a stream for them (rebuilding the whole response over
# every chunk, cost and logging payloads) has no reader but us (see _provider.lighten).
_LISTENER_LISTS = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "service_callback",
)


def app_listens() -> bool:
    """True if an app registered a litellm success callback or cache (litellm is loaded).

    Examples:
        >>> from deputy_shiny.models import _litellm
        >>> _litellm.app_listens() in (True, False)
        True
    """
    litellm: Any = _module
    if litellm is None:
        return False
    if litellm.cache is not None:
        return True
    return any(getattr(litellm, name, None) for name in _LISTENER_LISTS)


def is_loaded() -> bool:
    """True once litellm has been imported through :func:`get_litellm`."""
    return _module is not None


def warm_up() -> None:
    """Import litellm now (call it in a worker thread when an app starts).

    It also builds the package's pydantic validators, which import defers to first use,
    makes one offline request (see :func:`_first_request`), so the first user's first
    reply costs what the hundredth's does, and runs the process's first full garbage
    collection (see :func:`_collect_startup_heap`), so no user's burst pays for it.

    Examples:
        >>> from deputy_shiny import warm_up
        >>> warm_up()  # seconds the first time in a process, then nothing
    """
    get_litellm()
    complete_deferred_models()
    _first_request()
    _collect_startup_heap()


_collected = False


def _collect_startup_heap() -> None:
    """Take the first full garbage collection of the process here, once.

    litellm's import leaves about 400,000 objects the collector tracks, none collected
    yet: CPython runs a full collection once the objects promoted since the last one
    reach a quarter of those already old, and the import alone passes that. So the
    first busy moment after start (a burst of users) would pay a walk of all of them
    (0.25 s here, near a second under load) while every stream waits. Collecting here,
    in the warm-up's thread, moves them to the old generation and resets that count.
    (``gc.freeze`` would spare later full collections too, but it would also keep for
    good the cycles of any session open at that moment.)
    """
    global _collected
    if _collected:
        return
    _collected = True
    gc.collect()


_warmed = False


def _first_request() -> None:
    """Run litellm's first request path once, offline, before any user's.

    After the import, litellm's first ``acompletion`` still loads modules and builds
    pydantic types in its worker thread, and its first ``token_counter`` loads the
    tiktoken vocabulary: about 0.9 s here, paid by whoever asks first. A streamed
    ``mock_response`` request walks that path without the network or a provider.
    An app's litellm callbacks would see that request, so with any registered (or a
    cache) it is skipped and the first reply pays instead. It never raises.
    """
    global _warmed
    litellm: Any = get_litellm()
    if _warmed or app_listens():
        return
    _warmed = True
    try:
        litellm.token_counter(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(_mock_stream(litellm))
        else:  # called on an event loop's thread: the request runs on a loop of its own
            thread = threading.Thread(target=asyncio.run, args=(_mock_stream(litellm),))
            thread.start()
            thread.join()
    except Exception:  # a warm-up that fails leaves the first reply to pay, nothing more
        logger.debug("litellm's warm-up request failed", exc_info=True)


async def _mock_stream(litellm: Any) -> None:
    stream = await litellm.acompletion(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        mock_response="ok",
    )
    async for _chunk in stream:
        pass


def register_provider(
    name: str, factory: Callable[[ModuleType], Any], *, lacks: Iterable[str] = ()
) -> None:
    """Register a litellm ``CustomLLM`` provider under ``name`` (model strings ``name/...``).

    ``factory(litellm)`` builds the handler; it runs when litellm is (or already was)
    imported. Registering a name again replaces its handler. ``lacks`` names the
    capabilities (litellm's checks: ``supports_vision``...) its models do not have.
    """
    with _lock:
        _drain_forgotten()
        _lacking[name] = frozenset(lacks)
        if _module is None:
            _pending[name] = factory
        else:
            _install(name, factory)


def unregister_provider(name: str) -> None:
    """Remove a provider registered with :func:`register_provider` (no error if absent)."""
    with _lock:
        _forgotten.append(name)
        _drain_forgotten()


def forget_provider(name: str) -> None:
    """Schedule a provider's removal; safe to call from a garbage-collection finalizer.

    A finalizer can run at any allocation, including in the middle of this module's
    own loops over the provider tables (same thread, reentrant lock), so it must not
    touch them: it only queues the name (``deque.append`` is atomic), and the next
    registration or removal drains the queue under the lock.
    """
    _forgotten.append(name)


def _drain_forgotten() -> None:
    changed = False
    while _forgotten:
        name = _forgotten.popleft()
        _pending.pop(name, None)
        _lacking.pop(name, None)
        changed = _installed.pop(name, None) is not None or changed
    if changed and _module is not None:
        _sync_provider_map()


def is_registered(name: str) -> bool:
    """True if a custom provider of that name is registered (installed or pending)."""
    with _lock:
        return name in _installed or name in _pending


def provider_lacks(name: str) -> frozenset[str]:
    """The capabilities a registered provider said its models lack (see register_provider)."""
    with _lock:
        return _lacking.get(name, frozenset())


def _install(name: str, factory: Callable[[ModuleType], Any]) -> None:
    assert _module is not None
    _installed[name] = factory(_module)
    _sync_provider_map()
    # litellm also calls this on each request; calling it now makes the provider known
    # to get_llm_provider() before the first request (and warns if a built-in provider
    # of the same name would shadow ours).
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


def _sync_provider_map() -> None:
    """Make litellm's provider tables list exactly our installed providers (plus foreign ones).

    ``custom_provider_map`` is rebuilt from ``_installed`` and rebound rather than edited
    in place, so a request iterating the old list in another thread never sees it change
    under it. Rebuilding from ``_installed`` also heals a stale entry left behind when a
    test model's finalizer unregisters it in the middle of another rebuild (garbage
    collection can run a finalizer at any allocation, and the lock is reentrant).
    """
    assert _module is not None
    litellm: Any = _module
    current = list(litellm.custom_provider_map)
    ours_before = {entry.get("provider") for entry in current if entry.get(_MARK)}
    foreign = [
        entry
        for entry in current
        if not entry.get(_MARK) and entry.get("provider") not in _installed
    ]
    litellm.custom_provider_map = foreign + [
        {"provider": name, "custom_handler": handler, _MARK: True}
        for name, handler in _installed.items()
    ]
    for name in ours_before - set(_installed):
        if name in litellm._custom_providers:
            litellm._custom_providers.remove(name)
        if name in litellm.provider_list:
            litellm.provider_list.remove(name)
