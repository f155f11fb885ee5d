"""Two chats on one dashboard: an analyst that reads the filters, a writer that sets them.

Run it with ``shiny run examples/dashboard.py``. The sidebar's filters choose which
sales rows the table shows. The *Analyst* chat's ``read_dashboard`` tool reads the
filters and the rows they select; the *Writer* chat's ``set_filters`` tool changes the
filters, after the user approves it (the dialog names the chat that asks). Both chats
are module instances on one page: each has its own agent, and one approval queue
serves them.

The model is ``DEPUTY_MODEL``, else an offline stand-in for each chat: ask the analyst
anything, and tell the writer *show West* or *min 150*.
"""

from __future__ import annotations

import os
import re
from typing import Any

from shiny import App, Inputs, Outputs, Session, reactive, render, ui

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


def selected_rows(region: str, min_sales: int) -> list[dict[str, Any]]:
    return [
        row
        for row in SALES
        if (region == "All" or row["region"] == region) and row["sales"] >= min_sales
    ]


app_ui = ui.page_sidebar(
    ui.sidebar(
        ui.input_select("region", "Region", REGIONS),
        ui.input_slider("min_sales", "Minimum sales", 0, 250, 0, step=10),
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
    """Offline: *show <region>* and *min <n>* become one ``set_filters`` call."""

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
        if not arguments:
            return ScriptedReply("Tell me 'show <region>' or 'min <number>'.")
        return ScriptedReply(tool_calls=[ScriptedToolCall("set_filters", arguments)])

    return FunctionModel(reply)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    @render.ui
    def table() -> Any:
        rows = selected_rows(input.region(), input.min_sales())
        body = [
            ui.tags.tr(ui.tags.td(r["region"]), ui.tags.td(r["month"]), ui.tags.td(str(r["sales"])))
            for r in rows
        ]
        head = ui.tags.tr(ui.tags.th("Region"), ui.tags.th("Month"), ui.tags.th("Sales"))
        total = sum(r["sales"] for r in rows)
        return ui.TagList(
            ui.tags.table(head, *body, class_="table table-sm"), ui.p(f"Total: {total}")
        )

    def read_dashboard() -> str:
        """Read the dashboard's filters and the rows they select."""
        with reactive.isolate():  # a tool is not a reactive consumer: read, don't depend
            region, min_sales = input.region(), input.min_sales()
        rows = selected_rows(region, min_sales)
        total = sum(row["sales"] for row in rows)
        return f"region {region}, minimum sales {min_sales}: {len(rows)} rows, total {total}."

    async def set_filters(region: str | None = None, min_sales: int | None = None) -> str:
        """Change the dashboard's filters.

        Args:
            region: One of All, North, South, East, West.
            min_sales: Show only rows with at least these sales (0-250).
        """
        if region is not None and region not in REGIONS:
            return f"Unknown region {region!r}: use one of {', '.join(REGIONS)}."
        # Shiny's reactive lock is held only while the inputs are updated and sent.
        async with reactive.lock():
            if region is not None:
                ui.update_select("region", selected=region, session=session)
            if min_sales is not None:
                ui.update_slider("min_sales", value=max(0, min(250, min_sales)), session=session)
            await reactive.flush()
        minimum = "unchanged" if min_sales is None else min_sales
        return f"filters set (region {region or 'unchanged'}, minimum {minimum})."

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
