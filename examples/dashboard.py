"""Two chats on one dashboard: an analyst that reads the filters, a writer that sets them.

Run it with ``shiny run examples/dashboard.py``. The sidebar's filters (a select, a
slider, a checkbox group and radio buttons) choose which sales rows the table shows
and their order. The *Analyst* chat's ``read_dashboard`` tool reads the filters and the
rows they select; the *Writer* chat's ``set_filters`` tool changes the filters, after
the user approves it (the dialog names the chat that asks). Both chats are module
instances on one page: each has its own agent, and one approval queue serves them.

The tools are plain functions defined in ``server``: they run in the app's session, so
they read ``input`` and call ``ui.update_*`` as the app's own effects do.

The model is ``DEPUTY_MODEL``, else an offline stand-in for each chat: ask the analyst
anything, and tell the writer *show West*, *min 150*, *months Jan Feb* or *sort by
sales*.
"""

from __future__ import annotations

import os
import re
from typing import Any

from shiny import App, Inputs, Outputs, Session, render, ui

from deputy_shiny import Agent, Permissions, tool
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall

SALES: list[dict[str, Any]] = [
    {"region": region, "month": month, "sales": sales}
    for region, figures in {
        "North": (120, 135, 90),
        "South": (80, 95, 160),
        "East": (140, 150, 170),
        "West": (60, 210, 110),
    }.items()
    for month, sales in zip(("Jan", "Feb", "Mar"), figures, strict=True)
]
REGIONS = ["All", "North", "South", "East", "West"]
MONTHS = ["Jan", "Feb", "Mar"]
ORDERS = {"region": "Region", "sales": "Sales, highest first"}


def selected_rows(
    region: str, min_sales: int, months: tuple[str, ...] | list[str] = MONTHS, order: str = "region"
) -> list[dict[str, Any]]:
    rows = [
        row
        for row in SALES
        if (region == "All" or row["region"] == region)
        and row["sales"] >= min_sales
        and row["month"] in months
    ]
    return sorted(rows, key=lambda row: -row["sales"]) if order == "sales" else rows


app_ui = ui.page_sidebar(
    ui.sidebar(
        ui.input_select("region", "Region", REGIONS),
        ui.input_slider("min_sales", "Minimum sales", 0, 250, 0, step=10),
        ui.input_checkbox_group("months", "Months", MONTHS, selected=MONTHS, inline=True),
        ui.input_radio_buttons("order", "Order", ORDERS, inline=True),
        ui.output_ui("table"),
        width=320,
    ),
    ui.layout_columns(
        ui.card(ui.card_header("Analyst"), agent_chat_ui("analyst")),
        ui.card(ui.card_header("Writer"), agent_chat_ui("writer")),
    ),
    title="Sales dashboard",
)


def analyst_model() -> FunctionModel:
    """Offline: read the dashboard, then describe it."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return ScriptedReply(f"The dashboard shows {messages[-1]['content']}")
        return ScriptedReply(tool_calls=[ScriptedToolCall("read_dashboard", {})])

    return FunctionModel(reply)


def writer_model() -> FunctionModel:
    """Offline: *show <region>*, *min <n>*, *months <Mon> ...* and *sort by sales*
    (or *region*) become one ``set_filters`` call."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "tool":
            return ScriptedReply(f"Done: {last['content']}")
        text = str(last.get("content") or "")
        arguments: dict[str, Any] = {}
        if match := re.search(r"\bshow (\w+)", text, re.IGNORECASE):
            arguments["region"] = match.group(1).title()
        if match := re.search(r"\bmin (\d+)", text, re.IGNORECASE):
            arguments["min_sales"] = int(match.group(1))
        if match := re.search(r"\bmonths((?: \w{3}\b)+)", text, re.IGNORECASE):
            arguments["months"] = [month.title() for month in match.group(1).split()]
        if match := re.search(r"\bsort by (\w+)", text, re.IGNORECASE):
            arguments["order"] = match.group(1).lower()
        if not arguments:
            return ScriptedReply(
                "Tell me 'show <region>', 'min <number>', 'months Jan Feb' or 'sort by sales'."
            )
        return ScriptedReply(tool_calls=[ScriptedToolCall("set_filters", arguments)])

    return FunctionModel(reply)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    @render.ui
    def table() -> Any:
        rows = selected_rows(input.region(), input.min_sales(), input.months(), input.order())
        body = [
            ui.tags.tr(ui.tags.td(r["region"]), ui.tags.td(r["month"]), ui.tags.td(str(r["sales"])))
            for r in rows
        ]
        head = ui.tags.tr(ui.tags.th("Region"), ui.tags.th("Month"), ui.tags.th("Sales"))
        total = sum(r["sales"] for r in rows)
        return ui.TagList(
            ui.tags.table(head, *body, class_="table table-sm"), ui.p(f"Total: {total}")
        )

    # The tools run in this session (as the app's effects do): they read `input` and
    # call ui.update_* as is, from a worker thread too (these are sync functions).
    def read_dashboard() -> str:
        """Read the dashboard's filters and the rows they select."""
        region, min_sales, months = input.region(), input.min_sales(), input.months()
        rows = selected_rows(region, min_sales, months, input.order())
        total = sum(row["sales"] for row in rows)
        return (
            f"region {region}, months {'+'.join(months) or 'none'}, minimum sales "
            f"{min_sales}: {len(rows)} rows, total {total}."
        )

    def set_filters(
        region: str | None = None,
        min_sales: int | None = None,
        months: list[str] | None = None,
        order: str | None = None,
    ) -> str:
        """Change the dashboard's filters.

        Args:
            region: One of All, North, South, East, West.
            min_sales: Show only rows with at least these sales (0-250).
            months: The months to show, of Jan, Feb, Mar.
            order: "region" (the table's order) or "sales" (highest first).
        """
        if region is not None and region not in REGIONS:
            return f"Unknown region {region!r}: use one of {', '.join(REGIONS)}."
        if months is not None and not set(months) <= set(MONTHS):
            return f"Unknown months in {months!r}: use {', '.join(MONTHS)}."
        if order is not None and order not in ORDERS:
            return f"Unknown order {order!r}: use region or sales."
        if region is not None:
            ui.update_select("region", selected=region)
        if min_sales is not None:
            ui.update_slider("min_sales", value=max(0, min(250, min_sales)))
        if months is not None:
            ui.update_checkbox_group("months", selected=months)
        if order is not None:
            ui.update_radio_buttons("order", selected=order)
        changed = {"region": region, "minimum": min_sales, "months": months, "order": order}
        return (
            "filters set ("
            + ", ".join(
                f"{name} {'+'.join(v) if isinstance(v, list) else v}"
                for name, v in changed.items()
                if v is not None
            )
            + ")."
        )

    def make_analyst(ctx: AgentChatContext) -> Agent:
        return Agent(
            os.environ.get("DEPUTY_MODEL") or analyst_model(),
            tools=[
                tool(read_dashboard, annotations={"read_only_hint": True, "open_world_hint": False})
            ],
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
        )

    def make_writer(ctx: AgentChatContext) -> Agent:
        return Agent(
            os.environ.get("DEPUTY_MODEL") or writer_model(),
            tools=[
                tool(
                    set_filters,
                    annotations={
                        "read_only_hint": False,
                        "destructive_hint": False,
                        "open_world_hint": False,
                    },
                )
            ],
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            # A custom tool that may modify runs in standard mode only when allowlisted;
            # approval_tools makes it ask first.
            permissions=Permissions(tool_allowlist=["set_filters"], approval_tools=["set_filters"]),
        )

    agent_chat_server("analyst", make_analyst)
    agent_chat_server("writer", make_writer)


app = App(app_ui, server)
