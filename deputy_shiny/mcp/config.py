"""MCP server configuration: the common ``{"mcpServers": {name: {...}}}`` JSON format.

The format Claude Desktop and R's mcptools read. A server entry is either a local
command (stdio) or a URL (streamable HTTP)::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "docs": {"url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}, "timeout": 60}
    }}

``${VAR}`` in ``headers`` and ``env`` values is taken from the environment when the
config is loaded (a missing variable is an error), so secrets stay out of the file.
Unknown keys in an entry (``disabled``, ``autoApprove``...) are ignored; a known key
with a wrong value is an :class:`~deputy_shiny.errors.McpConfigError` naming the server
and the field.

Examples:
    >>> config = load_mcp_config({"mcpServers": {"time": {"command": "mcp-server-time"}}})
    >>> config.names(), config.server("time").command
    (('time',), 'mcp-server-time')
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import McpConfigError, McpUnknownServerError

__all__ = [
    "DEFAULT_MCP_CONFIG",
    "DEFAULT_MCP_TIMEOUT",
    "MCP_CONFIG_ENV",
    "McpConfig",
    "McpHttpServer",
    "McpInProcessServer",
    "McpServerConfig",
    "McpStdioServer",
    "load_mcp_config",
]

DEFAULT_MCP_CONFIG = "~/.config/mcptools/config.json"
"""Where the configuration is read from when none is given (mcptools' default)."""

MCP_CONFIG_ENV = "DEPUTY_MCP_CONFIG"
"""The environment variable naming another default configuration file."""

DEFAULT_MCP_TIMEOUT = 60.0
"""Seconds an MCP request (and a server's startup) may take when the config sets no timeout."""

_MAX_CONFIG_BYTES = 1_000_000
_VAR = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _ServerBase(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    name: str = Field(description="The server's name in the configuration.")
    timeout: float = Field(
        default=DEFAULT_MCP_TIMEOUT,
        description="Seconds a request may take before the connection is closed.",
    )


class McpStdioServer(_ServerBase):
    """A server started as a local process, talking MCP over its stdin and stdout.

    It gets the MCP SDK's safe default environment (HOME, PATH, USER...) plus ``env``,
    never the whole environment of this process (so API keys stay here unless the
    config passes them on, e.g. ``"env": {"TOKEN": "${TOKEN}"}``).

    Examples:
        >>> McpStdioServer(name="time", command="mcp-server-time").args
        ()
    """

    type: Literal["stdio"] = "stdio"
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None


class McpHttpServer(_ServerBase):
    """A server reached over streamable HTTP at ``url``, with extra request ``headers``.

    Examples:
        >>> McpHttpServer(name="docs", url="https://example.com/mcp").headers
        {}
    """

    type: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict, repr=False)


class McpInProcessServer(_ServerBase):
    """A server object of the MCP SDK (``MCPServer`` or a low-level ``Server``) run in this
    process over an in-memory transport: for tests and for tools an app serves itself.

    Examples:
        >>> from mcp.server.mcpserver import MCPServer
        >>> McpInProcessServer(name="demo", server=MCPServer("demo")).type
        'in_process'
    """

    type: Literal["in_process"] = "in_process"
    server: Any = Field(description="An mcp.server.mcpserver.MCPServer or mcp.server.Server.")


McpServerConfig = Annotated[
    McpStdioServer | McpHttpServer | McpInProcessServer, Field(discriminator="type")
]
"""One configured server: :class:`McpStdioServer`, :class:`McpHttpServer` or
:class:`McpInProcessServer`."""


class McpConfig(BaseModel):
    """A parsed MCP configuration: servers by name, and where it came from.

    Examples:
        >>> config = McpConfig(servers={"time": McpStdioServer(name="time", command="t")})
        >>> config.select(["time"])[0].name
        'time'
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    source: str | None = Field(
        default=None, description="The file it was read from (None: built in code)."
    )

    def names(self) -> tuple[str, ...]:
        """The configured server names, in file order."""
        return tuple(self.servers)

    def server(self, name: str) -> McpServerConfig:
        """The server called ``name``; :class:`McpUnknownServerError` lists the known names."""
        return self.select([name])[0]

    def select(self, names: Iterable[str] | None = None) -> list[McpServerConfig]:
        """The servers with exactly these names (None: all), checked before any connects."""
        if names is None:
            return list(self.servers.values())
        if isinstance(names, str):
            names = [names]
        chosen = list(dict.fromkeys(names))
        for name in chosen:
            if not isinstance(name, str):
                raise McpConfigError(f"Server names are strings, not {type(name).__name__}.")
        missing = [n for n in chosen if n not in self.servers]
        if missing:
            known = self.names()
            where = f" in {self.source}" if self.source else ""
            raise McpUnknownServerError(
                f"No MCP server named {', '.join(repr(m) for m in missing)}{where}; "
                f"the configured servers are: {', '.join(known) or 'none'}.",
                known=known,
            )
        return [self.servers[n] for n in chosen]


ConfigInput = str | os.PathLike[str] | Mapping[str, Any] | McpConfig | None
"""What :func:`load_mcp_config` accepts."""


def default_config_path() -> Path:
    """``$DEPUTY_MCP_CONFIG`` if set, else ``~/.config/mcptools/config.json``.

    Examples:
        >>> default_config_path().name
        'config.json'
    """
    return Path(os.environ.get(MCP_CONFIG_ENV) or DEFAULT_MCP_CONFIG).expanduser()


def load_mcp_config(config: ConfigInput = None) -> McpConfig:
    """Read and check an MCP configuration.

    ``config`` is a path (``~`` expanded), the parsed JSON as a dict, an
    :class:`McpConfig`, or None for the default file (:func:`default_config_path`);
    a default file that does not exist gives an empty configuration, a given path that
    does not exist is an error. Raises :class:`~deputy_shiny.errors.McpConfigError`
    naming the server and field of anything malformed.

    Examples:
        >>> load_mcp_config({"mcpServers": {"docs": {"url": "https://example.com/mcp"}}}
        ...                 ).server("docs").type
        'http'
        >>> try:
        ...     load_mcp_config({"mcpServers": {"x": {"args": []}}})
        ... except McpConfigError as e:
        ...     print(e)
        MCP server 'x': needs "command" (a local server) or "url" (a remote one).
    """
    if isinstance(config, McpConfig):
        return config
    if isinstance(config, Mapping):
        return _parse(config, source=None)
    if config is None:
        path = default_config_path()
        if not path.exists():
            return McpConfig(source=str(path))
    elif isinstance(config, str | os.PathLike):
        path = Path(config).expanduser()
        if not path.exists():
            raise McpConfigError(f"MCP config file {str(path)!r} does not exist.")
    else:
        raise McpConfigError(
            "config must be a path, a dict like {'mcpServers': {...}}, an McpConfig or None, "
            f"not {type(config).__name__}."
        )
    return _parse(_read_json(path), source=str(path))


def _read_json(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > _MAX_CONFIG_BYTES:
            raise McpConfigError(
                f"MCP config {str(path)!r} has {size:,} bytes; more than "
                f"{_MAX_CONFIG_BYTES:,} is not a configuration."
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"Cannot read MCP config {str(path)!r}: {exc}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except McpConfigError as exc:
        raise McpConfigError(f"MCP config {str(path)!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise McpConfigError(f"MCP config {str(path)!r} is not valid JSON: {exc}") from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise McpConfigError(f"the key {key!r} appears twice in one object.")
        seen[key] = value
    return seen


def _parse(data: Any, *, source: str | None) -> McpConfig:
    if not isinstance(data, Mapping):
        raise McpConfigError(
            f'An MCP config is a JSON object like {{"mcpServers": {{...}}}}, '
            f"not {type(data).__name__}."
        )
    entries = data.get("mcpServers")
    if entries is None:
        raise McpConfigError('An MCP config needs an "mcpServers" object (server name -> entry).')
    if not isinstance(entries, Mapping):
        raise McpConfigError(
            f'"mcpServers" must be an object (server name -> entry), not {type(entries).__name__}.'
        )
    servers: dict[str, McpServerConfig] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(f"MCP server names must be non-empty strings, got {name!r}.")
        servers[name] = _server(name, entry)
    return McpConfig(servers=servers, source=source)


def _server(name: str, entry: Any) -> McpServerConfig:
    if isinstance(entry, McpStdioServer | McpHttpServer | McpInProcessServer):
        return entry.model_copy(update={"name": name})
    where = f"MCP server {name!r}"
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where}: the entry must be an object, not {type(entry).__name__}.")
    kind = entry.get("type", entry.get("transport"))
    timeout = _timeout(where, entry.get("timeout"))
    if "command" in entry and "url" in entry:
        raise McpConfigError(f'{where}: has both "command" and "url"; give one.')
    if "url" in entry or kind in ("http", "streamable-http", "streamableHttp", "sse"):
        if kind not in (None, "http", "streamable-http", "streamableHttp"):
            raise McpConfigError(
                f'{where}: "type" {kind!r} is not supported; use streamable HTTP ("http").'
            )
        url = _string(where, "url", entry.get("url"))
        if not url.startswith(("http://", "https://")):
            raise McpConfigError(f'{where}: "url" must start with http:// or https://.')
        headers = _expand(where, "headers", _string_map(where, "headers", entry.get("headers")))
        return McpHttpServer(name=name, url=url, headers=headers, timeout=timeout)
    if "command" not in entry:
        raise McpConfigError(f'{where}: needs "command" (a local server) or "url" (a remote one).')
    if kind not in (None, "stdio"):
        raise McpConfigError(f'{where}: "type" {kind!r} does not go with "command"; use "stdio".')
    command = _string(where, "command", entry.get("command"))
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f'{where}: "args" must be a list of strings.')
    env = _expand(where, "env", _string_map(where, "env", entry.get("env")))
    cwd = entry.get("cwd")
    if cwd is not None:
        cwd = str(Path(_string(where, "cwd", cwd)).expanduser())
    return McpStdioServer(
        name=name, command=command, args=tuple(args), env=env, cwd=cwd, timeout=timeout
    )


def _string(where: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise McpConfigError(f'{where}: "{field}" must be a non-empty string, got {value!r:.80}.')
    return value


def _string_map(where: str, field: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise McpConfigError(f'{where}: "{field}" must be an object of strings.')
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or not isinstance(item, str):
            raise McpConfigError(
                f'{where}: "{field}" must map names to strings; {key!r:.40} does not.'
            )
        out[key] = item
    return out


def _timeout(where: str, value: Any) -> float:
    if value is None:
        return DEFAULT_MCP_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise McpConfigError(f'{where}: "timeout" must be a number of seconds, got {value!r:.40}.')
    if not math.isfinite(value) or value <= 0:
        raise McpConfigError(f'{where}: "timeout" must be a positive number of seconds.')
    return float(value)


def _expand(where: str, field: str, values: dict[str, str]) -> dict[str, str]:
    """Replace ``${VAR}`` with the environment's value; a missing variable is an error."""

    def replace(key: str, match: re.Match[str]) -> str:
        var = match.group(1)
        if not _VAR_NAME.match(var):
            raise McpConfigError(f'{where}: "{field}" {key!r} has a malformed ${{{var}}}.')
        value = os.environ.get(var)
        if value is None:
            raise McpConfigError(
                f'{where}: "{field}" {key!r} uses ${{{var}}}, which is not set in the environment.'
            )
        return value

    return {key: _VAR.sub(lambda m, k=key: replace(k, m), value) for key, value in values.items()}  # type: ignore[misc]
