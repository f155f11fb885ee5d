"""The MCP configuration: the common JSON format, ${VAR} expansion, hostile files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import load_mcp_config
from deputy_shiny.errors import McpConfigError, McpUnknownServerError
from deputy_shiny.mcp import (
    DEFAULT_MCP_TIMEOUT,
    McpConfig,
    McpHttpServer,
    McpStdioServer,
    default_config_path,
)


def write(tmp_path: Path, data: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_stdio_and_http_entries_from_a_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "time": {
                    "command": "uvx",
                    "args": ["mcp-server-time"],
                    "env": {"TZ": "UTC"},
                    "cwd": "~",
                    "disabled": False,  # unknown keys of other clients are ignored
                },
                "docs": {"url": "https://example.com/mcp", "timeout": 5},
            }
        },
    )
    config = load_mcp_config(path)
    assert config.names() == ("time", "docs")
    assert config.source == str(path)
    time = config.server("time")
    assert isinstance(time, McpStdioServer)
    assert (time.command, time.args, time.env) == ("uvx", ("mcp-server-time",), {"TZ": "UTC"})
    assert time.cwd == str(Path.home())
    assert time.timeout == DEFAULT_MCP_TIMEOUT
    docs = config.server("docs")
    assert isinstance(docs, McpHttpServer)
    assert (docs.url, docs.timeout) == ("https://example.com/mcp", 5.0)


def test_str_path_and_mapping_and_config_are_accepted(tmp_path: Path) -> None:
    data = {"mcpServers": {"a": {"command": "a"}}}
    path = write(tmp_path, data)
    assert load_mcp_config(str(path)).names() == ("a",)
    assert load_mcp_config(data).source is None
    config = McpConfig(servers={"a": McpStdioServer(name="a", command="a")})
    assert load_mcp_config(config) is config


def test_headers_and_env_expand_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "s3cret")
    config = load_mcp_config(
        {
            "mcpServers": {
                "docs": {
                    "url": "https://example.com/mcp",
                    "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Cost": "$5"},
                },
                "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${DOCS_TOKEN}"}},
            }
        }
    )
    docs = config.server("docs")
    assert isinstance(docs, McpHttpServer)
    assert docs.headers == {"Authorization": "Bearer s3cret", "X-Cost": "$5"}
    gh = config.server("gh")
    assert isinstance(gh, McpStdioServer)
    assert gh.env == {"GITHUB_TOKEN": "s3cret"}
    assert "s3cret" not in repr(config)  # secrets stay out of reprs and logs


def test_a_missing_variable_names_server_header_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(McpConfigError) as caught:
        load_mcp_config(
            {
                "mcpServers": {
                    "docs": {"url": "https://x.example", "headers": {"Auth": "${NOPE_TOKEN}"}}
                }
            }
        )
    message = str(caught.value)
    assert "'docs'" in message and "headers" in message and "NOPE_TOKEN" in message


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"args": ["x"]}, '"command"'),
        ({"command": ""}, '"command"'),
        ({"command": 7}, '"command"'),
        ({"command": "x\x00y"}, '"command"'),
        ({"command": "x", "args": "--flag"}, '"args"'),
        ({"command": "x", "args": [1, 2]}, '"args"'),
        ({"command": "x", "env": ["A=1"]}, '"env"'),
        ({"command": "x", "env": {"A": 1}}, '"env"'),
        ({"command": "x", "timeout": -1}, '"timeout"'),
        ({"command": "x", "timeout": "10"}, '"timeout"'),
        ({"command": "x", "timeout": True}, '"timeout"'),
        ({"command": "x", "timeout": float("inf")}, '"timeout"'),
        ({"command": "x", "type": "sse"}, '"type"'),
        ({"command": "x", "url": "https://x.example"}, '"command" and "url"'),
        ({"url": "file:///etc/passwd"}, '"url"'),
        ({"url": "https://x.example", "type": "sse"}, '"type"'),
        ({"url": "https://x.example", "headers": "Bearer x"}, '"headers"'),
        ({"url": "https://x.example", "headers": {"A": "${lower case}"}}, "malformed"),
        ("not an object", "object"),
        (None, "object"),
    ],
)
def test_malformed_entries_name_the_server_and_field(entry: Any, field: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        load_mcp_config({"mcpServers": {"broken": entry}})
    assert "'broken'" in str(caught.value)
    assert field in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[]",
        '{"servers": {}}',
        '{"mcpServers": []}',
        '{"mcpServers": {"": {"command": "x"}}}',
        '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_hostile_files_are_config_errors(tmp_path: Path, text: str) -> None:
    with pytest.raises(McpConfigError):
        load_mcp_config(write(tmp_path, text))


def test_huge_and_binary_files_are_config_errors(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text('{"mcpServers": {}, "pad": "' + "x" * 1_100_000 + '"}')
    with pytest.raises(McpConfigError, match="bytes"):
        load_mcp_config(big)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(McpConfigError):
        load_mcp_config(binary)


def test_a_given_path_must_exist_but_a_missing_default_is_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(McpConfigError, match="does not exist"):
        load_mcp_config(tmp_path / "missing.json")
    monkeypatch.setenv("DEPUTY_MCP_CONFIG", str(tmp_path / "missing.json"))
    assert load_mcp_config().servers == {}


def test_the_default_path_and_its_environment_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEPUTY_MCP_CONFIG", raising=False)
    assert default_config_path() == Path("~/.config/mcptools/config.json").expanduser()
    path = write(tmp_path, {"mcpServers": {"env": {"command": "x"}}})
    monkeypatch.setenv("DEPUTY_MCP_CONFIG", str(path))
    assert load_mcp_config().names() == ("env",)
    assert load_mcp_config(None).source == str(path)


def test_selection_is_exact_and_unknown_names_list_the_known_ones() -> None:
    config = load_mcp_config(
        {"mcpServers": {"github": {"command": "gh"}, "time": {"command": "t"}}}
    )
    assert [s.name for s in config.select(["time"])] == ["time"]
    assert [s.name for s in config.select("github")] == ["github"]
    assert [s.name for s in config.select(None)] == ["github", "time"]
    with pytest.raises(McpUnknownServerError) as caught:
        config.select(["GitHub", "time"])
    assert caught.value.known == ("github", "time")
    assert "'GitHub'" in str(caught.value) and "github, time" in str(caught.value)


def test_bad_config_argument_types() -> None:
    with pytest.raises(McpConfigError):
        load_mcp_config(42)  # type: ignore[arg-type]
    with pytest.raises(McpConfigError):
        load_mcp_config({"mcpServers": {"a": {"command": "x"}}}).select([3])  # type: ignore[list-item]
