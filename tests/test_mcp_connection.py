"""McpConnection against in-memory servers: allowlists, capability tools, discovery,
prompts, one request at a time, timeouts, closing, and tools bound to their agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    ConfigurationError,
    ContentImage,
    ContentText,
    McpConnection,
    McpError,
    tool_metadata,
)
from deputy_shiny.errors import (
    InvalidToolError,
    McpBusyError,
    McpConnectionError,
    McpTimeoutError,
    McpUnknownServerError,
)
from deputy_shiny.testing import ScriptedModel

from .mcp_servers import PNG_1PX, in_process, notes_server, paging_server


def agent(**kwargs: Any) -> Agent:
    return Agent(ScriptedModel([]), **kwargs)


@pytest.fixture
def notes() -> Any:
    return notes_server()


async def test_tools_are_exactly_the_allowlist(notes: Any) -> None:
    owner = agent()
    conn = await McpConnection.open(in_process(notes=notes), "notes", owner, tools=["add"])
    try:
        assert [t.name for t in conn.tools()] == ["add"]
        assert conn.status == "connected" and conn.error is None and conn.pid is None
        assert conn.id.startswith("mcp_") and conn.server == "notes"
        source = tool_metadata(conn.tools()[0])["source"]
        assert source == {
            "type": "mcp",
            "server": "notes",
            "tool": "add",
            "remote_name": "add",
            "connection_id": conn.id,
        }
        assert await conn.tools()[0].invoke({"a": 2, "b": 3}) == "5"
        with pytest.raises(McpError, match="not allowed"):
            await conn.call_tool_result("delete_note", {"title": "x"})
    finally:
        await conn.aclose()
    assert str(conn.status) == "closed"


async def test_an_allowlisted_tool_the_server_lacks_is_an_error(notes: Any) -> None:
    with pytest.raises(McpError, match=r"does not offer the tools 'nope'.*offers: add"):
        await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=["add", "nope"])


async def test_unknown_server_fails_before_connecting(notes: Any) -> None:
    with pytest.raises(McpUnknownServerError, match="notes"):
        await McpConnection.open(in_process(notes=notes), "nope", agent())


async def test_annotations_are_the_servers_and_missing_ones_stay_missing(notes: Any) -> None:
    conn = await McpConnection.open(
        in_process(notes=notes), "notes", agent(), tools=["add", "delete_note"]
    )
    try:
        by_name = {t.name: tool_metadata(t) for t in conn.tools()}
        assert by_name["add"]["annotations"] == {
            "read_only_hint": True,
            "destructive_hint": False,
            "open_world_hint": False,
            "idempotent_hint": True,
        }
        assert by_name["delete_note"]["annotations"] == {}
        assert len(by_name["delete_note"]["missing_annotations"]) == 4
        assert by_name["delete_note"]["effective_annotations"]["destructive_hint"] is True
    finally:
        await conn.aclose()


async def test_error_results_become_errors_and_images_content(notes: Any) -> None:
    conn = await McpConnection.open(
        in_process(notes=notes), "notes", agent(), tools=["fail", "picture"]
    )
    try:
        tools = {t.name: t for t in conn.tools()}
        from deputy_shiny import ToolInvocationError

        with pytest.raises(ToolInvocationError, match="broken on purpose"):
            await tools["fail"].invoke({"message": "broken on purpose"})
        output = await tools["picture"].invoke({})
        # The image stays an image (#37): the engine sends it to a model that takes one.
        assert output == [
            ContentText(text="a tiny picture"),
            ContentImage(data=PNG_1PX, media_type="image/png"),
        ]
        assert conn.status == "connected"  # an error result is not a broken connection
    finally:
        await conn.aclose()


async def test_capability_tools_are_limited_to_the_allowlists(notes: Any) -> None:
    owner = agent()
    conn = await McpConnection.open(
        in_process(notes=notes),
        "notes",
        owner,
        resources=["notes://today"],
        prompts=["summarize"],
    )
    try:
        assert conn.tools() == []
        plain = {t.name: t for t in conn.capability_tools()}
        assert sorted(plain) == ["get_prompt", "read_resource"]
        prefixed = [t.name for t in conn.capability_tools(prefix="papers")]
        assert prefixed == ["papers_read_resource", "papers_get_prompt"]
        read = plain["read_resource"]
        assert read.parameters["properties"]["uri"]["enum"] == ["notes://today"]
        assert await read.invoke({"uri": "notes://today"}) == "Buy milk."
        meta = tool_metadata(read)
        assert meta["annotations"]["read_only_hint"] is True
        assert meta["annotations"]["open_world_hint"] is True
        assert meta["source"]["connection_id"] == conn.id
        with pytest.raises(McpError, match="not allowed"):
            await conn.read_resource("notes://secret")
        from deputy_shiny.errors import ToolArgumentsError

        with pytest.raises(ToolArgumentsError):
            read.parse_arguments({"uri": "notes://secret"})
        text = await plain["get_prompt"].invoke(
            {"prompt": "summarize", "arguments": {"topic": "milk"}}
        )
        assert text == "[user]\nSummarize the notes about milk."
    finally:
        await conn.aclose()


async def test_capability_tools_need_web_access(notes: Any) -> None:
    from deputy_shiny import Permissions, permissions_check_async

    conn = await McpConnection.open(
        in_process(notes=notes), "notes", agent(), resources=["notes://today"]
    )
    try:
        read = conn.capability_tools()[0]
        args = {"uri": "notes://today"}
        denied = await permissions_check_async(Permissions(), read, args, ".")
        assert (denied.decision, denied.step) == ("deny", "mode")
        allowed = await permissions_check_async(Permissions(web=True), read, args, ".")
        assert allowed.decision == "allow"
    finally:
        await conn.aclose()


async def test_get_prompt_returns_messages_and_touches_no_conversation(notes: Any) -> None:
    owner = agent()
    conn = await McpConnection.open(in_process(notes=notes), "notes", owner, prompts=["summarize"])
    try:
        messages = await conn.get_prompt("summarize", {"topic": "tea"})
        assert [(m.role, m.text) for m in messages] == [("user", "Summarize the notes about tea.")]
        assert owner.get_turns() == []
        with pytest.raises(McpError, match="not allowed"):
            await conn.get_prompt("other")
    finally:
        await conn.aclose()


async def test_discover_pages_with_cursors_and_never_widens() -> None:
    server = paging_server(pages=3, per_page=2)
    conn = await McpConnection.open(
        in_process(memos=server), "memos", agent(), resources=["memo://0"]
    )
    try:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await conn.discover("resources", cursor)
            pages += 1
            assert page.kind == "resources"
            seen += [item["uri"] for item in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert seen == [f"memo://{i}" for i in range(6)]
        assert conn.capability_tools()[0].parameters["properties"]["uri"]["enum"] == ["memo://0"]
        with pytest.raises(McpError, match="not allowed"):
            await conn.read_resource("memo://5")
        prompts = await conn.discover("prompts")
        assert [p["name"] for p in prompts.items] == ["greet"]
        with pytest.raises(McpError):  # this server has no tools capability
            await conn.discover("tools")
        with pytest.raises(ConfigurationError):
            await conn.discover("everything")  # type: ignore[arg-type]
    finally:
        await conn.aclose()


async def test_resource_and_prompt_only_servers_need_no_tool_catalogue() -> None:
    server = paging_server()
    conn = await McpConnection.open(
        in_process(memos=server), "memos", agent(), resources=["memo://1"], prompts=["greet"]
    )
    try:
        assert conn.tools() == []
        assert await conn.read_resource("memo://1") == "memo memo://1"
        messages = await conn.get_prompt("greet", {"name": "Ada"})
        assert messages[0].text == "Greet Ada."
    finally:
        await conn.aclose()


async def test_a_tool_less_connection_never_lists_tools(notes: Any) -> None:
    calls: list[str] = []
    original = notes._tool_manager.list_tools

    def spy() -> Any:
        calls.append("tools/list")
        return original()

    notes._tool_manager.list_tools = spy
    conn = await McpConnection.open(
        in_process(notes=notes), "notes", agent(), prompts=["summarize"]
    )
    await conn.get_prompt("summarize", {"topic": "x"})
    await conn.aclose()
    assert calls == []
    conn = await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=["add"])
    await conn.aclose()
    assert calls == ["tools/list"]


async def test_one_request_at_a_time_and_other_connections_go_on(notes: Any) -> None:
    config = in_process(notes=notes)
    first = await McpConnection.open(config, "notes", agent(), tools=["wait", "add"])
    second = await McpConnection.open(config, "notes", agent(), tools=["add"])
    try:
        tools = {t.name: t for t in first.tools()}
        slow = asyncio.create_task(tools["wait"].invoke({"seconds": 0.5}))
        await asyncio.sleep(0.05)
        with pytest.raises(McpBusyError, match="busy with tools/call wait"):
            await first.call_tool_result("add", {"a": 1, "b": 1})
        assert await second.tools()[0].invoke({"a": 1, "b": 1}) == "2"
        assert await slow == "waited"
        assert await tools["add"].invoke({"a": 2, "b": 2}) == "4"  # free again
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_busy_connection_gives_the_model_an_error_result(notes: Any) -> None:
    from deputy_shiny import ToolInvocationError

    conn = await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=["wait"])
    try:
        wait = conn.tools()[0]
        slow = asyncio.create_task(wait.invoke({"seconds": 0.3}))
        await asyncio.sleep(0.05)
        with pytest.raises(ToolInvocationError, match="busy"):
            await wait.invoke({"seconds": 0})
        await slow
    finally:
        await conn.aclose()


async def test_a_request_outliving_its_timeout_closes_the_connection(notes: Any) -> None:
    conn = await McpConnection.open(
        in_process(notes=notes), "notes", agent(), tools=["wait", "add"], timeout=0.3
    )
    started = asyncio.get_running_loop().time()
    with pytest.raises(McpTimeoutError, match=r"took longer than 0\.3 s"):
        await conn.call_tool_result("wait", {"seconds": 5})
    assert asyncio.get_running_loop().time() - started < 3
    assert conn.status == "failed"
    assert "took longer" in (conn.error or "")
    with pytest.raises(McpConnectionError, match="never reconnects"):
        await conn.call_tool_result("add", {"a": 1, "b": 2})
    await conn.aclose()  # closing a failed connection is fine
    assert conn.status == "failed"


async def test_close_and_cancel_are_final_and_repeatable(notes: Any) -> None:
    conn = await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=["add"])
    add = conn.tools()[0]
    await conn.aclose()
    await conn.aclose()
    from deputy_shiny import ToolInvocationError

    with pytest.raises(ToolInvocationError, match="closed"):
        await add.invoke({"a": 1, "b": 2})
    assert conn.status == "closed"

    conn = await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=["wait"])
    slow = asyncio.create_task(conn.call_tool_result("wait", {"seconds": 5}))
    await asyncio.sleep(0.05)
    await conn.acancel()
    with pytest.raises((asyncio.CancelledError, McpConnectionError)):
        await slow
    assert conn.status in ("closed", "failed")


async def test_tools_refuse_another_agent_or_session(notes: Any) -> None:
    owner = agent(agent_id="a1", session_id="s1")
    conn = await McpConnection.open(in_process(notes=notes), "notes", owner, tools=["add"])
    try:
        owner.register_tools(conn.tools())
        owner.register_tools(conn.capability_tools())
        with pytest.raises(InvalidToolError, match="belongs to agent 'a1'"):
            agent(agent_id="a2", session_id="s1").register_tools(conn.tools())
        with pytest.raises(InvalidToolError, match="belongs to session 's1'"):
            agent(agent_id="a1", session_id="s2").register_tools(conn.tools())
        with pytest.raises(InvalidToolError, match=conn.id):
            Agent(ScriptedModel([]), tools=conn.tools())
        with pytest.raises(InvalidToolError):
            agent().set_tools(conn.tools())
    finally:
        await conn.aclose()


async def test_bad_arguments_are_configuration_errors(notes: Any) -> None:
    with pytest.raises(ConfigurationError):
        await McpConnection.open(in_process(notes=notes), "notes", object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        await McpConnection.open(in_process(notes=notes), "notes", agent(), tools=[""])
    conn = await McpConnection.open(in_process(notes=notes), "notes", agent(), prompts=["x"])
    try:
        with pytest.raises(ConfigurationError):
            conn.capability_tools(prefix="")
        with pytest.raises(InvalidToolError):
            conn.capability_tools(prefix="bad prefix")
    finally:
        await conn.aclose()


def test_the_sync_api_for_scripts() -> None:
    notes = notes_server()
    owner = agent()
    conn = McpConnection(
        in_process(notes=notes), "notes", owner, tools=["add"], prompts=["summarize"]
    )
    assert conn.get_prompt_sync("summarize", {"topic": "a"})[0].text.endswith("about a.")
    assert conn.discover_sync("tools").items[0]["name"] == "add"
    assert "connected" in repr(conn)
    owner.close()  # closing the agent closes its connections
    assert conn.status == "closed"
    conn.close()
    conn.cancel()


async def test_the_blocking_constructor_refuses_a_running_loop(notes: Any) -> None:
    from deputy_shiny.errors import SyncInAsyncError

    with pytest.raises(SyncInAsyncError):
        McpConnection(in_process(notes=notes), "notes", agent(), tools=["add"])


async def test_a_connection_on_the_callers_loop_serves_it_there(notes: Any) -> None:
    seen: list[bool] = []
    test_loop = asyncio.get_running_loop()

    @notes.tool()
    async def where() -> str:
        """Which loop serves the call."""
        seen.append(asyncio.get_running_loop() is test_loop)
        return "here"

    owner = agent()
    conn = await McpConnection.open(
        in_process(notes=notes), "notes", owner, tools=["where"], loop="current"
    )
    try:
        assert await conn.tools()[0].invoke({}) == "here"
        assert seen == [True]  # served on this loop: no hop to the MCP loop thread
    finally:
        await owner.aclose()  # the agent closes it, on this loop
    assert conn.status == "closed"
    with pytest.raises(ConfigurationError, match='"mcp" or "current"'):
        await McpConnection.open(
            in_process(notes=notes),
            "notes",
            owner,
            tools=["add"],
            loop="other",  # type: ignore[arg-type]
        )


def test_a_connection_whose_loop_ended_is_closed_not_hung() -> None:
    notes = notes_server()
    owner = agent()

    async def open_here() -> McpConnection:
        return await McpConnection.open(
            in_process(notes=notes), "notes", owner, tools=["add"], loop="current"
        )

    conn = asyncio.run(open_here())  # that loop ends here, and its owner task with it

    async def call() -> Any:
        return await conn.call_tool_result("add", {"a": 1, "b": 2})

    with pytest.raises(McpConnectionError, match="loop that owns this MCP connection"):
        asyncio.run(call())
    owner.close()  # nothing left to close, and no hang
