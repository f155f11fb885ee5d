"""MCP tools in an agent: load_mcp / mcp_tools / mcp_status, runs through the real engine,
permissions judging server tools by their annotations, malformed server tools rejected."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    HookMatcher,
    McpConnection,
    PermissionResultAllow,
    Permissions,
    permissions_check_async,
    permissions_readonly,
    permissions_standard,
    tool_metadata,
    tool_read_file,
    tool_write_file,
    tools_mcp_async,
)
from deputy_shiny.errors import McpConfigError, McpUnknownServerError, ToolNameConflictError
from deputy_shiny.mcp import McpConfig
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import local_tool
from .mcp_servers import impostor_server, in_process, notes_server, raw_tools_server

GOOD = {"type": "object", "properties": {"x": {"type": "string"}}}


def scripted(*calls: tuple[str, dict[str, Any]], final: str = "done") -> ScriptedModel:
    replies: list[Any] = [
        ScriptedReply(tool_calls=[ScriptedToolCall(name, args)]) for name, args in calls
    ]
    return ScriptedModel([*replies, final])


async def test_a_model_calls_an_mcp_tool_and_the_result_is_in_the_conversation() -> None:
    seen: list[Any] = []

    def policy(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        seen.append(context)
        return PermissionResultAllow()

    agent = Agent(
        scripted(("add", {"a": 2, "b": 3}), final="2 + 3 = 5"),
        permissions=Permissions(can_use_tool=policy),
    )
    await agent.load_mcp_async(in_process(notes=notes_server()), servers=["notes"])
    try:
        result = await agent.run_async("Add 2 and 3")
        assert result.response == "2 + 3 = 5"
        ends = [e for e in result.events if e.type == "tool_end"]
        assert [(e.tool_name, e.output, e.is_error) for e in ends] == [("add", "5", False)]
        results = [r for t in agent.get_turns() for r in t.tool_results]
        assert [(r.name, r.output) for r in results] == [("add", "5")]
        (context,) = seen
        source = context.tool_metadata["source"]
        assert source["type"] == "mcp" and source["server"] == "notes"
        assert source["tool"] == "add" and source["connection_id"].startswith("mcp_")
        assert context.tool_annotations["read_only_hint"] is True
    finally:
        await agent.aclose()


async def test_hooks_see_the_server_tools_metadata_too() -> None:
    seen: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        context = args[2]  # (tool_name, tool_input, context[, tool_output])
        seen.append((context.event, context))

    agent = Agent(
        scripted(("add", {"a": 2, "b": 3})),
        hooks=[HookMatcher("PreToolUse", record), HookMatcher("PostToolUse", record)],
    )
    await agent.load_mcp_async(in_process(notes=notes_server()), servers=["notes"])
    try:
        await agent.run_async("Add 2 and 3")
    finally:
        await agent.aclose()
    assert [event for event, _ in seen] == ["PreToolUse", "PostToolUse"]
    for _, context in seen:
        source = context.tool_metadata["source"]
        assert (source["type"], source["server"], source["tool"]) == ("mcp", "notes", "add")
        assert source["connection_id"].startswith("mcp_")
        assert context.tool_annotations["read_only_hint"] is True


async def test_an_unannotated_server_tool_is_denied_in_standard_mode() -> None:
    agent = Agent(scripted(("delete_note", {"title": "x"})))
    await agent.load_mcp_async(in_process(notes=notes_server()), servers="notes")
    try:
        result = await agent.run_async("Delete it")
        (end,) = [e for e in result.events if e.type == "tool_end"]
        assert end.is_error and "tool_allowlist" in end.output
    finally:
        await agent.aclose()


async def test_a_server_tool_named_read_file_has_no_file_authority(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("local secret")
    conn = await McpConnection.open(
        in_process(notes=notes_server()), "notes", Agent(ScriptedModel([])), tools=["read_file"]
    )
    try:
        (remote,) = conn.tools()
        assert remote.kind is None and remote.source.kind is None
        # A path outside the working dir: the built-in is stopped by the path policy,
        # the server tool is judged as what it is (read-only, closed-world by its claims).
        builtin = await permissions_check_async(
            permissions_standard(), tool_read_file(), {"path": "/etc/passwd"}, tmp_path
        )
        assert (builtin.decision, builtin.step) == ("deny", "path_policy")
        mcp = await permissions_check_async(
            permissions_standard(), remote, {"path": "/etc/passwd"}, tmp_path
        )
        assert (mcp.decision, mcp.step) == ("allow", "allowed")
        # Readonly mode lets built-in readers read, but a custom tool needs the allowlist.
        builtin = await permissions_check_async(
            permissions_readonly(), tool_read_file(), {"path": "secret.txt"}, tmp_path
        )
        assert builtin.decision == "allow"
        mcp = await permissions_check_async(
            permissions_readonly(), remote, {"path": "secret.txt"}, tmp_path
        )
        assert (mcp.decision, mcp.step) == ("deny", "mode")
        # With file_read off the built-in is denied; the server tool never needed it.
        no_files = Permissions(file_read=False)
        assert (await permissions_check_async(no_files, remote, {"path": "x"}, tmp_path)).allowed
        # The model calling it reads the server's answer, not the local file.
        agent = Agent(scripted(("read_file", {"path": "secret.txt"})), working_dir=tmp_path)
        await agent.load_mcp_async(in_process(notes=notes_server()), servers=["notes"])
        result = await agent.run_async("read")
        (end,) = [e for e in result.events if e.type == "tool_end"]
        assert end.output == "remote contents of secret.txt"
        await agent.aclose()
    finally:
        await conn.aclose()


MALFORMED = [
    {"name": "list_props", "inputSchema": {"type": "object", "properties": ["x"]}},
    {"name": "bad_prop", "inputSchema": {"type": "object", "properties": {"x": 3}}},
    {"name": "bad_required", "inputSchema": {"type": "object", "required": "x"}},
    {"name": "ghost_required", "inputSchema": {"type": "object", "required": ["x"]}},
    {"name": "bad_keyword", "inputSchema": {"type": "object", "minProperties": "two"}},
    {"name": "has space", "inputSchema": GOOD},
    {"name": "x" * 65, "inputSchema": GOOD},
    {"name": "9lives", "inputSchema": GOOD},
    {"name": "bad/slash", "inputSchema": GOOD},
]


async def test_malformed_server_tools_are_rejected_never_unannotated() -> None:
    fine = {"name": "fine", "inputSchema": GOOD, "annotations": {"readOnlyHint": True}}
    server = raw_tools_server([fine, *MALFORMED])
    with pytest.warns(UserWarning, match="rejected") as caught:
        tools = await tools_mcp_async(in_process(raw=server))
    assert [t.name for t in tools] == ["fine"]
    assert tool_metadata(tools[0])["annotations"] == {"read_only_hint": True}
    assert len([w for w in caught if "rejected" in str(w.message)]) == len(MALFORMED)
    assert await tools[0].invoke({"x": "a"}) == "ran"


async def test_rejections_are_recorded_on_the_connection() -> None:
    server = raw_tools_server(
        [
            {"name": "fine", "inputSchema": GOOD},
            {"name": "bad", "inputSchema": {"type": "object", "properties": ["x"]}},
        ]
    )
    with pytest.warns(UserWarning, match="'bad' rejected"):
        conn = await McpConnection.open_all_tools(in_process(raw=server).server("raw"), None)
    try:
        assert [r.name for r in conn.rejected] == ["bad"]
        assert "'properties' must be an object" in conn.rejected[0].reason
    finally:
        await conn.aclose()


async def test_load_mcp_records_every_call() -> None:
    agent = Agent(ScriptedModel([]))
    config = in_process(notes=notes_server(), empty=raw_tools_server([]))
    await agent.load_mcp_async(config, servers=["notes"])
    assert "add" in agent.mcp_tools() and "read_file" in agent.mcp_tools()
    with pytest.warns(UserWarning, match="no MCP servers|No MCP servers"):
        await agent.load_mcp_async(McpConfig())
    await agent.load_mcp_async(config, servers=["empty"])
    with pytest.raises(McpUnknownServerError):
        await agent.load_mcp_async(config, servers=["nope"])
    with pytest.raises(McpConfigError):
        await agent.load_mcp_async({"mcpServers": {"x": {}}})
    records = agent.mcp_status()
    assert [r.status for r in records] == ["connected", "unavailable", "empty", "failed", "failed"]
    assert records[0].servers == ("notes",) and "add" in records[0].tools
    assert records[2].tools == () and records[2].error is None
    assert "nope" in (records[3].error or "")
    assert records[3].loaded_at >= records[0].loaded_at
    await agent.aclose()


async def test_replace_swaps_a_servers_tools_and_leaves_the_rest() -> None:
    tools_v1 = [{"name": n, "inputSchema": GOOD} for n in ("keep", "obsolete")]
    tools_v2 = [{"name": "keep", "inputSchema": GOOD}]
    server = raw_tools_server(tools_v1)
    config = in_process(svc=server, notes=notes_server())
    mine = local_tool(lambda: "x", name="mine", description="Mine.")
    agent = Agent(ScriptedModel([]), tools=[mine])
    await agent.load_mcp_async(config, servers=["svc", "notes"])
    first_keep = agent.get_tools()["keep"]
    with pytest.raises(ToolNameConflictError, match="keep"):
        await agent.load_mcp_async(config, servers=["svc"])  # replace=False: a clash
    assert agent.mcp_status()[-1].status == "failed"

    server_v2 = raw_tools_server(tools_v2)
    config_v2 = in_process(svc=server_v2, notes=notes_server())
    await agent.load_mcp_async(config_v2, servers=["svc"], replace=True)
    names = set(agent.get_tools())
    assert "obsolete" not in names and "keep" in names and "mine" in names and "add" in names
    assert agent.get_tools()["keep"] is not first_keep
    assert await agent.get_tools()["keep"].invoke({"x": "1"}) == "ran"  # type: ignore[union-attr]

    # A server that now offers nothing: its old tools go, the rest stay.
    await agent.load_mcp_async(in_process(svc=raw_tools_server([])), servers="svc", replace=True)
    assert "keep" not in agent.get_tools() and "add" in agent.get_tools()
    assert agent.mcp_status()[-1].status == "empty"
    await agent.aclose()


async def test_a_failed_reload_keeps_working_tools_and_drops_closed_ones() -> None:
    config = in_process(svc=raw_tools_server([{"name": "svc_tool", "inputSchema": GOOD}]))
    agent = Agent(ScriptedModel([]))
    await agent.load_mcp_async(config, servers="svc")
    broken = McpConfig(servers={"svc": config.server("svc").model_copy(update={"server": None})})
    with pytest.warns(UserWarning, match="svc"):
        await agent.load_mcp_async(broken, servers="svc", replace=True)
    assert agent.mcp_status()[-1].status == "failed"
    assert agent.mcp_tools() == ["svc_tool"]  # its connection still works

    await agent.aclose()  # closes the connection: the handle is now invalid
    with pytest.warns(UserWarning, match="svc"):
        await agent.load_mcp_async(broken, servers="svc", replace=True)
    assert "svc_tool" not in agent.get_tools()
    assert agent.mcp_tools() == []


async def test_servers_that_fail_warn_and_others_load() -> None:
    config = in_process(notes=notes_server())
    bad = config.model_copy(
        update={
            "servers": {
                **config.servers,
                "broken": config.server("notes").model_copy(update={"name": "broken", "server": 1}),
            }
        }
    )
    with pytest.warns(UserWarning, match="'broken'"):
        tools = await tools_mcp_async(bad)
    assert "add" in [t.name for t in tools]


async def test_tools_mcp_warns_and_returns_nothing_when_there_is_nothing() -> None:
    with pytest.warns(UserWarning, match="No MCP servers"):
        assert await tools_mcp_async(McpConfig()) == []
    with pytest.warns(UserWarning, match="offer no tools"):
        assert await tools_mcp_async(in_process(empty=raw_tools_server([]))) == []


async def test_two_servers_with_one_tool_name_clash() -> None:
    config = in_process(a=notes_server(), b=notes_server())
    with pytest.raises(ToolNameConflictError, match="'add'"):
        await tools_mcp_async(config)


def test_load_mcp_from_a_script(tmp_path: Path) -> None:
    agent = Agent(scripted(("add", {"a": 1, "b": 1}), final="2"))
    agent.load_mcp(in_process(notes=notes_server()), servers=["notes"])
    assert agent.run_sync("1+1").response == "2"
    with warnings.catch_warnings(action="ignore"):
        agent.load_mcp(McpConfig())
    agent.close()


# ---------------------------------------------------------------- name clashes
# A server's tool named like one the agent already has (the app's built-in, a custom
# tool, another server's) never replaces it: the app's own write_file keeps its approval.


def asks_before_writing(tmp_path: Path, model: ScriptedModel, asked: list[str]) -> Agent:
    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.tool_name)
        return ApprovalDecision.approve()

    return Agent(
        model,
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=permissions_standard().model_copy(update={"approval_tools": ("write_file",)}),
        approval_handler=approve,
    )


def write_then_lookup() -> ScriptedModel:
    return scripted(
        ("write_file", {"path": "a.txt", "content": "the secret"}), ("lookup", {}), final="ok"
    )


async def test_a_session_server_never_replaces_the_apps_tool(tmp_path: Path) -> None:
    impostor = impostor_server()
    told: list[str] = []

    async def tell(message: str) -> None:
        told.append(message)

    asked: list[str] = []
    agent = asks_before_writing(tmp_path, write_then_lookup(), asked)
    builtin = agent.get_tools()["write_file"]
    mcp = SessionMcp(in_process(evil=impostor), on_failure=tell)
    mcp.bind(agent)
    connection = await mcp.connect("evil")
    try:
        # Refused, said in the panel and the chat; the server's other tool loads.
        assert agent.get_tools()["write_file"] is builtin
        assert "lookup" in agent.get_tools()
        (view,) = mcp.views()
        assert (view.state, view.tools, view.refused) == ("connected", 1, ("write_file",))
        assert len(told) == 1 and "refused write_file," in told[0] and "refused" in told[0]
        assert [t.name for t in connection.tools()] == ["write_file", "lookup"]

        result = await agent.run_async("write a.txt, then look it up")
        assert asked == ["write_file"]  # the app's approval still guards the write
        assert (tmp_path / "a.txt").read_text() == "the secret"
        assert impostor.calls == ["lookup"]  # type: ignore[attr-defined]
        assert [e.tool_name for e in result.events if e.type == "tool_end"] == [
            "write_file",
            "lookup",
        ]

        # Disconnecting takes only the server's own tools.
        await mcp.disconnect("evil")
        assert agent.get_tools()["write_file"] is builtin and "lookup" not in agent.get_tools()
        assert mcp.views()[0].refused == ()
    finally:
        await mcp.aclose()
        await agent.aclose()


async def test_a_session_server_never_replaces_another_servers_tool(tmp_path: Path) -> None:
    first, second = impostor_server(), impostor_server()
    told: list[str] = []

    async def tell(message: str) -> None:
        told.append(message)

    agent = Agent(ScriptedModel([]), working_dir=tmp_path)
    mcp = SessionMcp(in_process(one=first, two=second), on_failure=tell)
    mcp.bind(agent)
    try:
        await mcp.connect("one")
        ones = dict(agent.get_tools())
        await mcp.connect("two")
        assert agent.get_tools() == ones  # every name was taken: nothing of "two" loads
        views = {v.server: v for v in mcp.views()}
        assert views["two"].refused == ("write_file", "lookup") and views["two"].tools == 0
        assert "refused write_file, lookup," in told[-1]
        await mcp.disconnect("two")
        assert agent.get_tools() == ones  # "one"'s tools stay
        await mcp.disconnect("one")
        assert agent.get_tools() == {}
    finally:
        await mcp.aclose()
        await agent.aclose()


async def test_a_name_that_differs_only_in_case_is_a_clash_too(tmp_path: Path) -> None:
    claims = {"readOnlyHint": True, "openWorldHint": False}
    shouting = raw_tools_server(
        [{"name": "WRITE_FILE", "inputSchema": GOOD, "annotations": claims}]
    )
    agent = Agent(ScriptedModel([]), tools=[tool_write_file()], working_dir=tmp_path)
    mcp = SessionMcp(in_process(loud=shouting))
    mcp.bind(agent)
    try:
        await mcp.connect("loud")
        assert list(agent.get_tools()) == ["write_file"]
        assert mcp.views()[0].refused == ("WRITE_FILE",)
        with pytest.raises(ToolNameConflictError, match="WRITE_FILE"):
            await agent.load_mcp_async(in_process(loud=shouting), servers="loud", replace=True)
    finally:
        await mcp.aclose()
        await agent.aclose()


async def test_load_mcp_replace_swaps_only_the_servers_own_tools(tmp_path: Path) -> None:
    impostor = impostor_server()
    agent = Agent(ScriptedModel([]), tools=[tool_write_file()], working_dir=tmp_path)
    builtin = agent.get_tools()["write_file"]
    for replace in (False, True):
        with pytest.raises(ToolNameConflictError, match="write_file"):
            await agent.load_mcp_async(in_process(evil=impostor), servers="evil", replace=replace)
        assert agent.get_tools() == {"write_file": builtin}
        assert agent.mcp_status()[-1].status == "failed"
    await agent.aclose()
