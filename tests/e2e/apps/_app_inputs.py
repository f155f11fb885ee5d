"""What the app-inputs scenarios share: the app's inputs, and tools that set and read them.

Each place a chat sits (the app itself, or a module of the app's own) shows a checkbox
group ``species``, radio buttons ``colour``, a select ``region``, a slider ``size`` and a
text output ``summary`` that the app's server renders from them. The chat's model turns

- ``set <sync|async> <explicit|implicit> <species+species> <colour> <region> <size>``
  into a call of ``set_inputs_<sync|async>`` (``explicit``: every ``ui.update_*`` gets
  ``session=session``; ``implicit``: none does),
- ``read <sync|async>`` into a call of ``read_inputs_<sync|async>``, which reads the
  inputs with no ``reactive.isolate()`` of its own,
- ``region <region>`` into a call of ``set_region_anywhere``, one module-level tool
  that every session's agent shares (no ``session=``),

then answers ``Done: <the tool's result>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shiny import Inputs, Session, ui

from deputy_shiny import Agent, tool
from deputy_shiny.shiny import AgentChatContext
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._shared import last_tool_text, last_user_text

SPECIES = ["setosa", "versicolor", "virginica"]
COLOURS = ["red", "green", "blue"]
REGIONS = ["North", "South", "East", "West"]


def inputs_ui() -> ui.TagList:
    """The four inputs (their ids resolve in the caller's module, as any input's)."""
    return ui.TagList(
        ui.input_checkbox_group("species", "Species", SPECIES, selected=["setosa"]),
        ui.input_radio_buttons("colour", "Colour", COLOURS, selected="red"),
        ui.input_select("region", "Region", REGIONS, selected="North"),
        ui.input_slider("size", "Size", 0, 100, 10),
    )


def summary_text(input: Inputs) -> str:
    """What the ``summary`` output shows (and the read tools return)."""
    return (
        f"species={'+'.join(input.species())} colour={input.colour()} "
        f"region={input.region()} size={input.size()}"
    )


def _set(session: Session, explicit: bool, arguments: dict[str, Any]) -> str:
    given: dict[str, Any] = {"session": session} if explicit else {}
    species, colour = arguments["species"], arguments["colour"]
    # choices= too: py-shiny names the new options by the id resolved in the current
    # namespace (the bug this guards against named them after the kit's module).
    ui.update_checkbox_group("species", choices=SPECIES, selected=species, **given)
    ui.update_radio_buttons("colour", choices=COLOURS, selected=colour, **given)
    ui.update_select("region", selected=arguments["region"], **given)
    ui.update_slider("size", value=arguments["size"], **given)
    done = f"set {'+'.join(species)} {colour} {arguments['region']} {arguments['size']}"
    ui.notification_show(f"Notified: {done}", **given)  # a message sent at once
    return done


def set_region_anywhere(region: str) -> str:
    """Set the region (a tool defined once, at module level, shared by every session)."""
    ui.update_select("region", selected=region)
    return f"region {region}"


def app_tools(session: Session, input: Inputs) -> list[Any]:
    """The app's four tools, closures over its ``session`` and ``input`` (as users write)."""

    def set_inputs_sync(
        species: list[str], colour: str, region: str, size: int, explicit: bool
    ) -> str:
        """Set the app's inputs (in a worker thread)."""
        return _set(session, explicit, locals())

    async def set_inputs_async(
        species: list[str], colour: str, region: str, size: int, explicit: bool
    ) -> str:
        """Set the app's inputs (on the event loop)."""
        return _set(session, explicit, locals())

    def read_inputs_sync() -> str:
        """Read the app's inputs (in a worker thread)."""
        return summary_text(input)

    async def read_inputs_async() -> str:
        """Read the app's inputs (on the event loop)."""
        return summary_text(input)

    return [
        tool(fn, annotations={"read_only_hint": True, "open_world_hint": False})
        for fn in (
            set_inputs_sync,
            set_inputs_async,
            read_inputs_sync,
            read_inputs_async,
            set_region_anywhere,
        )
    ]


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    result = last_tool_text(messages)
    if result is not None:
        return ScriptedReply(f"Done: {result}")
    words = (last_user_text(messages) or "").split()
    if words[:1] == ["read"]:
        return ScriptedReply(tool_calls=[ScriptedToolCall(f"read_inputs_{words[1]}", {})])
    if words[:1] == ["region"]:
        call = ScriptedToolCall("set_region_anywhere", {"region": words[1]})
        return ScriptedReply(tool_calls=[call])
    _, kind, how, species, colour, region, size = words
    arguments = {
        "species": species.split("+"),
        "colour": colour,
        "region": region,
        "size": int(size),
        "explicit": how == "explicit",
    }
    return ScriptedReply(tool_calls=[ScriptedToolCall(f"set_inputs_{kind}", arguments)])


def agent_factory(session: Session, input: Inputs) -> Callable[[AgentChatContext], Agent]:
    """The chat's factory: an agent with the app's tools and the scripted model."""

    def make_agent(ctx: AgentChatContext) -> Agent:
        return Agent(
            FunctionModel(reply),
            tools=app_tools(session, input),
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
        )

    return make_agent
