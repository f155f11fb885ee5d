"""Traces and logs: OpenTelemetry spans of every run, and the run's ids on log records.

:func:`instrument` turns on spans (the ``[otel]`` extra: ``pip install
'deputy_shiny[otel]'``), sent to OpenTelemetry's global ``TracerProvider`` as other
instrumented libraries do; ``DEPUTY_OTEL=1`` in the environment calls it as
``deputy_shiny`` is imported. Until then no OpenTelemetry module is imported and runs
pay nothing for tracing. ``_otel.py`` here describes the span tree (and the guide's
"Traces and logs" page).

:class:`RunLogFilter` puts ``run_id``, ``session_id``, ``agent_id`` and ``call_id`` on
each log record a handler sees; :class:`JsonLogFormatter` writes records as JSON lines.

Examples:
    >>> import logging
    >>> from deputy_shiny.observability import JsonLogFormatter, RunLogFilter
    >>> handler = logging.StreamHandler()
    >>> handler.addFilter(RunLogFilter())
    >>> handler.setFormatter(JsonLogFormatter())
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._engine.observer import observer_factory, set_observer_factory
from .._util.log_context import JsonLogFormatter, RunLogFilter

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = [
    "JsonLogFormatter",
    "RunLogFilter",
    "feedback_event",
    "instrument",
    "tracing",
    "uninstrument",
]

logger = logging.getLogger(__name__)

ENV_VAR = "DEPUTY_OTEL"
"""Set to ``1`` (or ``true``) to call :func:`instrument` as the package is imported."""


def instrument(tracer_provider: TracerProvider | None = None) -> None:
    """Trace every run from now on: spans for the run, each model request, each tool
    call, each approval wait and each delegation (GenAI semantic conventions).

    Spans go to ``tracer_provider``, or (None) to OpenTelemetry's global provider,
    looked up as each run starts, so one configured later (``opentelemetry-instrument``,
    ``logfire.configure()``...) is used. A run's span nests under the span current as
    it starts: py-shiny's session and reactive spans when the app enables them. Calling
    it again replaces the provider.

    Examples:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        ...     InMemorySpanExporter,
        ... )
        >>> from deputy_shiny import Agent, instrument, uninstrument
        >>> from deputy_shiny.testing import ScriptedModel
        >>> exporter = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
        >>> instrument(provider)
        >>> Agent(ScriptedModel(["Hi!"]), agent_name="greeter").chat("Hello")
        'Hi!'
        >>> uninstrument()
        >>> [span.name for span in exporter.get_finished_spans()][-1]
        'invoke_agent greeter'

    Raises:
        ImportError: OpenTelemetry is not installed (the ``[otel]`` extra).
    """
    from . import _otel  # imports opentelemetry: only now

    global _provider
    _provider = tracer_provider
    set_observer_factory(_otel.factory(tracer_provider))


def uninstrument() -> None:
    """Stop tracing runs that start from now on."""
    set_observer_factory(None)


_provider: TracerProvider | None = None  # instrument()'s, for spans outside a run


def tracing() -> bool:
    """Whether :func:`instrument` is in force (runs are traced).

    Examples:
        >>> from deputy_shiny.observability import tracing
        >>> tracing()
        False
    """
    return observer_factory() is not None


def feedback_event(attributes: Mapping[str, str | int | float | bool]) -> bool:
    """Emit a user's rating of a reply as a ``feedback`` span with a
    ``gen_ai.evaluation.result`` event (``attributes``: ids, the rating; never content)
    when tracing is on; whether it did. A tracing failure is logged, never raised.

    Examples:
        >>> feedback_event({"gen_ai.evaluation.score.label": "up"})  # tracing is off
        False
    """
    if not tracing():
        return False
    try:
        from . import _otel

        _otel.emit_feedback(_provider, dict(attributes))
    except Exception:
        logger.debug("deputy_shiny tracing failed", exc_info=True)
        return False
    return True


def instrument_from_environment(environ: Mapping[str, str]) -> bool:
    """Call :func:`instrument` when ``environ`` has ``DEPUTY_OTEL`` set to ``1``,
    ``true``, ``yes`` or ``on`` (any case); return whether it did."""
    if environ.get(ENV_VAR, "").strip().lower() not in ("1", "true", "yes", "on"):
        return False
    instrument()
    return True
