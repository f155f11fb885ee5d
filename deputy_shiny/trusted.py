"""Trusted results: the one tool allowed to produce each kind of result the app trusts.

A :class:`TrustedResults` policy names, for each result type, the one tool that may
produce it. When that tool returns, the engine hands its value, unchanged, to the app:
as a ``trusted_result`` event (:class:`~deputy_shiny.events.TrustedResultEvent`),
through :func:`result_trusted_results`, and to the optional ``on_result`` callback. The
value never has to pass through model text, so a model (or a prompt injection) cannot
restate or alter it. This is the "trusted mini-agent" pattern of Will Landau and Sam
Parmar, as deputy implements it.

So that each trusted tool stays the only source of its results, an agent with a policy
checks all its tools whenever they change (at construction, ``register_tools``,
``set_tools``, skills, MCP): the change is a
:class:`~deputy_shiny.errors.TrustedResultsError`, and the tools stay as they were, if

* a trusted tool is missing;
* a trusted tool is not a local function tool (MCP, provider-native), runs code or
  delegates;
* another tool runs model-written code (``run_python``, ``run_bash``) or delegates to
  another agent: it could produce any result;
* another tool is not annotated both read-only and closed-world (or is destructive),
  and is not listed in ``exempt_tools`` (only local function tools can be exempted).

The policy allows no call by itself: permissions, hooks and approvals still govern
every call of every tool.

Examples:
    >>> from deputy_shiny import Agent, tool, tool_annotations
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> def forecast(city: str) -> dict:
    ...     "The forecast for a city."
    ...     return {"city": city, "high_c": 21}
    >>> model = ScriptedModel([
    ...     ScriptedReply(tool_calls=[ScriptedToolCall("forecast", {"city": "Oslo"})]),
    ...     "Done.",
    ... ])
    >>> closed = tool_annotations(read_only_hint=True, open_world_hint=False)
    >>> agent = Agent(model, tools=[tool(forecast, annotations=closed)],
    ...               trusted_results=TrustedResults({"forecast": "forecast"}))
    >>> [r.value for r in result_trusted_results(agent.run_sync("Oslo?"))]
    [{'city': 'Oslo', 'high_c': 21}]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from .errors import TrustedResultsError
from .events import AgentResult, TrustedResultEvent
from .tools import NativeWebTool, Tool, effective_annotations

__all__ = ["TrustedResults", "check_trusted_tools", "result_trusted_results"]

_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DELEGATING_MODULES = ("deputy_shiny.delegation", "deputy_shiny.agent._delegation")
_HINT = " See deputy_shiny.trusted.TrustedResults for the no-bypass rule."


class TrustedResults(BaseModel):
    """A frozen policy: for each result type, the one tool allowed to produce it.

    Args:
        results: ``{result_type: tool_name}``; a tool produces at most one type.
            Types use letters, digits, dots, underscores and hyphens.
        on_result: Called with each :class:`~deputy_shiny.events.TrustedResultEvent` as
            soon as the trusted tool returns, before the model sees anything. If it
            raises, the event is still recorded and the model gets a tool error instead.
        exempt_tools: Local function tools the app asserts cannot produce a trusted
            result although they may write or reach the open world.
        model_receipt: True: the model gets a receipt naming the result id and type
            instead of the value, so it cannot restate it.

    Examples:
        >>> policy = TrustedResults({"forecast": "get_forecast"}, model_receipt=True)
        >>> policy.result_type("get_forecast"), policy.result_type("other")
        ('forecast', None)
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    results: dict[str, str]
    on_result: Callable[[TrustedResultEvent], Any] | None = None
    exempt_tools: tuple[str, ...] = ()
    model_receipt: bool = False

    def __init__(
        self,
        results: Mapping[str, str],
        /,
        *,
        on_result: Callable[[TrustedResultEvent], Any] | None = None,
        exempt_tools: Iterable[str] = (),
        model_receipt: bool = False,
    ) -> None:
        if isinstance(exempt_tools, str):
            raise TrustedResultsError("exempt_tools must be a list of tool names, not a string")
        try:
            super().__init__(
                results=dict(results) if isinstance(results, Mapping) else results,
                on_result=on_result,
                exempt_tools=tuple(dict.fromkeys(exempt_tools)),
                model_receipt=model_receipt,
            )
        except ValidationError as exc:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise TrustedResultsError(f"TrustedResults: {problems}") from None

    @field_validator("results")
    @classmethod
    def _check_results(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("name at least one result type and its tool")
        for kind, name in value.items():
            if not _TYPE.match(kind):
                raise ValueError(
                    f"result type {kind!r} must use only letters, digits, '.', '_' or '-'"
                )
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"result type {kind!r} must name one tool")
        names = list(value.values())
        if len(set(names)) != len(names):
            raise ValueError("a tool can produce only one trusted result type")
        return value

    @model_validator(mode="after")
    def _check_exempt(self) -> TrustedResults:
        if self.on_result is not None and not callable(self.on_result):
            raise ValueError("on_result must be a function or None")
        clash = sorted(set(self.exempt_tools) & set(self.results.values()))
        if clash:
            raise ValueError(f"trusted tools cannot also be exempt: {', '.join(clash)}")
        return self

    def result_type(self, tool_name: str) -> str | None:
        """The result type ``tool_name`` produces, or None."""
        for kind, name in self.results.items():
            if name == tool_name:
                return kind
        return None

    def receipt(self, result_id: str, result_type: str) -> str:
        """What the model sees instead of the value when ``model_receipt`` is on."""
        return (
            f"Trusted result {result_id} ({result_type}) was delivered directly to the user. "
            "Its values are withheld from this conversation. Refer to it by its id; do not "
            "restate or estimate them."
        )


def _bypass(tool: Tool) -> str | None:
    """Why ``tool`` could produce any result (runs code, delegates), or None."""
    source = tool.source
    if source.kind == "code":
        return "runs model-written code"
    if source.type == "function" and (source.module or "").startswith(_DELEGATING_MODULES):
        return "delegates to another agent"
    return None


def check_trusted_tools(
    policy: TrustedResults | None,
    tools: Mapping[str, Tool],
    natives: Mapping[str, NativeWebTool] = {},
) -> None:
    """Check a complete set of tools against ``policy`` (None: nothing to check).

    Raises:
        TrustedResultsError: see the module docs for the rules.

    Examples:
        >>> from deputy_shiny import tool_run_bash
        >>> policy = TrustedResults({"total": "run_bash"})
        >>> check_trusted_tools(policy, {"run_bash": tool_run_bash()})
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.TrustedResultsError: Trusted tool 'run_bash' ...
    """
    if policy is None:
        return
    trusted = set(policy.results.values())
    missing = sorted(trusted - set(tools))
    if missing:
        raise TrustedResultsError(
            f"Trusted tool {missing[0]!r} must stay registered (it is the only source of "
            f"{policy.result_type(missing[0])!r} results).{_HINT}"
        )
    for name in natives:
        raise TrustedResultsError(
            f"Provider-native tool {name!r} runs at the provider and could bypass a trusted "
            f"tool.{_HINT}"
        )
    for name, item in tools.items():
        bypass = _bypass(item)
        if name in trusted:
            if item.source.type == "mcp" or bypass is not None:
                raise TrustedResultsError(
                    f"Trusted tool {name!r} must be a local function tool that neither runs "
                    f"code nor delegates (it is {bypass or 'an MCP tool'}).{_HINT}"
                )
            continue
        if bypass is not None:
            raise TrustedResultsError(
                f"Tool {name!r} {bypass} and could bypass a trusted tool.{_HINT}"
            )
        if name in policy.exempt_tools:
            if item.source.type == "mcp":
                raise TrustedResultsError(
                    f"Only local function tools can be exempted; {name!r} is an MCP tool.{_HINT}"
                )
            continue
        hints = effective_annotations(item.annotations)
        if not hints["read_only_hint"] or hints["destructive_hint"] or hints["open_world_hint"]:
            raise TrustedResultsError(
                f"Tool {name!r} may write or reach the open world, so it could bypass a "
                "trusted tool. Annotate it read_only_hint=True, open_world_hint=False, or "
                f"list it in exempt_tools.{_HINT}"
            )


def result_trusted_results(
    result: AgentResult, type: str | None = None
) -> list[TrustedResultEvent]:
    """The ``trusted_result`` events of a run, optionally of one result ``type``.

    Each carries ``result_id``, ``result_type``, ``tool_name``, ``call_id``,
    ``arguments`` and the tool's unchanged ``value``, plus the run's ids.

    Examples:
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedModel
        >>> result_trusted_results(Agent(ScriptedModel(["Hi"])).run_sync("Hello"))
        []
    """
    if not isinstance(result, AgentResult):
        raise TypeError(f"result must be an AgentResult, not {result.__class__.__name__}")
    return [
        event
        for event in result.events
        if isinstance(event, TrustedResultEvent) and (type is None or event.result_type == type)
    ]
