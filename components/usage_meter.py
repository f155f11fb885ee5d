"""The usage meter: requests, tokens, tool calls and cost of this session's conversation.

Examples:
    >>> from deputy_shiny import AgentUsage
    >>> [row[1] for row in usage_rows(AgentUsage())]
    ['0', '0', '0', '$0.00']
    >>> usage_rows(AgentUsage(requests=3, cost=None, cost_missing=3))[-1]
    ('Cost', 'unknown', 'no price is known for 3 requests')
"""

from __future__ import annotations

from collections.abc import Callable

from htmltools import Tag, tags
from shiny import Inputs, Outputs, Session, render, ui

from deputy_shiny import AgentUsage
from deputy_shiny.shiny import _module as kit_module
from deputy_shiny.usage import format_cost  # the kit's usage line words a cost the same way

__all__ = ["format_cost", "usage_meter_server", "usage_meter_ui", "usage_rows"]


def usage_rows(usage: AgentUsage) -> list[tuple[str, str, str | None]]:
    """(label, value, detail) rows of the meter."""
    tokens_detail = f"{usage.input_tokens:,} in · {usage.output_tokens:,} out"
    cost_detail = None
    if usage.cost is None and usage.cost_missing:
        cost_detail = (
            f"no price is known for {usage.cost_missing} "
            f"request{'s' if usage.cost_missing != 1 else ''}"
        )
    return [
        ("Requests", f"{usage.requests:,}", None),
        ("Tokens", f"{usage.total_tokens:,}", tokens_detail if usage.total_tokens else None),
        ("Tool calls", f"{usage.tool_calls:,}", None),
        ("Cost", format_cost(usage), cost_detail),
    ]


@kit_module.ui
def usage_meter_ui() -> Tag:
    """The meter (filled in by :func:`usage_meter_server`)."""
    return ui.div(ui.output_ui("meter"), class_="deputy-usage-meter")


@kit_module.server
def usage_meter_server(
    input: Inputs,
    output: Outputs,
    session: Session,
    usage: Callable[[], AgentUsage],
    running: Callable[[], bool],
    pending: Callable[[], int],
    budget: Callable[[], str] | None = None,
) -> None:
    """Show ``usage()`` (updated after each run), whether the agent works or waits, and,
    with ``budget``, today's spend against the user's daily budget."""

    @render.ui
    def meter() -> Tag:
        rows = [
            tags.div(
                tags.dt(label),
                tags.dd(value, tags.small(detail) if detail else None),
                class_="deputy-usage-row",
            )
            for label, value, detail in usage_rows(usage())
        ]
        waiting = pending()
        if waiting:
            status = tags.div(
                f"Waiting for you: {waiting} request{'s' if waiting != 1 else ''} to answer",
                class_="deputy-status deputy-status-waiting",
            )
        elif running():
            status = tags.div("The agent is working…", class_="deputy-status deputy-status-busy")
        else:
            status = tags.div("Idle", class_="deputy-status")
        today = budget() if budget is not None else ""
        line = tags.p(today, class_="deputy-usage-budget") if today else None
        return tags.div(status, tags.dl(*rows, class_="deputy-usage-list"), line)
