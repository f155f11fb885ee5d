"""web_search and provider-native search: the search half of :mod:`deputy_shiny.tools.web`.

The universal ``web_search`` tool asks an injectable backend (by default DuckDuckGo
through the optional ``ddgs`` package); :class:`NativeWebSearch` is the marker an agent
turns into request parameters when its model's provider searches natively. Everything
here is re-exported by :mod:`deputy_shiny.tools.web`, the public import path.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._util.callables import is_async_callable
from ..errors import ToolInvocationError
from ._tool import Tool, ToolAnnotations, builtin_source, tool, tool_annotations
from ._tool_threads import run_in_tool_thread

__all__ = [
    "WEB_SEARCH_ANNOTATIONS",
    "NativeWebSearch",
    "SearchBackend",
    "SearchResult",
    "bind_native_web_search",
    "ddgs_search",
    "tool_web_search",
]

# the logger web_search always used: its records keep the public module's name
logger = logging.getLogger("deputy_shiny.tools.web")

WEB_SEARCH_ANNOTATIONS = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=True, idempotent_hint=False
)


# --------------------------------------------------------------------------- web_search


class SearchResult(BaseModel):
    """One search hit as the backend reports it.

    Examples:
        >>> SearchResult(title="Python", url="https://python.org", snippet="Home").url
        'https://python.org'
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    title: str = ""
    url: str
    snippet: str = ""


SearchBackend = Callable[
    [str, int], Sequence[Mapping[str, Any]] | Awaitable[Sequence[Mapping[str, Any]]]
]
"""``backend(query, max_results) -> [{"title", "url", "snippet"}, ...]``, sync or async."""


def ddgs_search(query: str, max_results: int) -> list[dict[str, str]]:
    """Search DuckDuckGo with the ``ddgs`` package (``pip install 'deputy_shiny[web]'``).

    The default backend of :func:`tool_web_search`. Raises
    :class:`~deputy_shiny.errors.ToolInvocationError` when ``ddgs`` is not installed.

    Examples:
        >>> callable(ddgs_search)  # calling it would search the web
        True
    """
    try:  # imported by name: ddgs is optional, and mypy must not need it installed
        ddgs: Any = importlib.import_module("ddgs")
        ddgs_exceptions: Any = importlib.import_module("ddgs.exceptions")
    except ImportError:
        raise ToolInvocationError(
            "web_search needs the 'ddgs' package, which is not installed: "
            "pip install 'deputy_shiny[web]' (or pass tool_web_search(backend=...))."
        ) from None
    try:
        hits = ddgs.DDGS(timeout=10).text(query, max_results=max_results, backend="duckduckgo")
    except ddgs_exceptions.DDGSException as e:
        if "no results" in str(e).lower():
            return []
        raise
    return [
        {
            "title": str(hit.get("title") or ""),
            "url": str(hit.get("href") or hit.get("url") or ""),
            "snippet": str(hit.get("body") or hit.get("snippet") or ""),
        }
        for hit in hits
    ]


def _coerce_results(raw: Any) -> list[SearchResult]:
    if raw is None:
        return []
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        raise ToolInvocationError(
            f"web_search: the search backend returned {type(raw).__name__}, not a list of results."
        )
    results = []
    for item in raw:
        if isinstance(item, SearchResult):
            results.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ToolInvocationError(
                f"web_search: the search backend returned a {type(item).__name__} result, "
                "not a dict with title, url and snippet."
            )
        url = item.get("url") or item.get("href") or item.get("link")
        if not url:
            continue
        results.append(
            SearchResult(
                title=str(item.get("title") or ""),
                url=str(url),
                snippet=str(item.get("snippet") or item.get("body") or ""),
            )
        )
    return results


def _format_results(query: str, results: list[SearchResult]) -> str:
    if not results:
        return f"No results found for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for index, hit in enumerate(results, 1):
        lines.append("")
        lines.append(f"{index}. {hit.title or '(untitled)'}")
        lines.append(f"   URL: {hit.url}")
        if hit.snippet:
            lines.append(f"   {' '.join(hit.snippet.split())}")
    return "\n".join(lines)


def tool_web_search(backend: SearchBackend | None = None) -> Tool:
    """Create the ``web_search`` tool: search the web and list titles, URLs and snippets.

    ``backend(query, max_results)`` returns a list of dicts with ``title``, ``url`` and
    ``snippet`` (``href``/``body`` are accepted too); it may be sync (run in a worker
    thread) or async. None uses :func:`ddgs_search` (DuckDuckGo; needs the ``web`` extra).

    Args:
        backend: The search function; None for DuckDuckGo.

    Examples:
        >>> def fake(query, max_results):
        ...     return [{"title": "Result", "url": "https://example.org", "snippet": query}]
        >>> t = tool_web_search(backend=fake)
        >>> import asyncio
        >>> print(asyncio.run(t.invoke({"query": "deputy"})))
        Search results for 'deputy':
        <BLANKLINE>
        1. Result
           URL: https://example.org
           deputy
    """
    search: SearchBackend = backend if backend is not None else ddgs_search
    if not callable(search):
        raise TypeError(f"backend must be callable, got {type(search).__name__}")

    async def web_search(
        query: str,
        max_results: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> str:
        """Search the web; returns the top results' titles, URLs and snippets.

        Args:
            query: What to search for.
            max_results: How many results to return (1-20).
        """
        query = query.strip()
        if not query:
            raise ToolInvocationError("web_search: the query is empty.")
        try:
            if is_async_callable(search):
                raw: Any = await search(query, max_results)  # type: ignore[misc]
            else:
                raw = await run_in_tool_thread(search, query, max_results)
                if inspect.isawaitable(raw):
                    raw = await raw
        except ToolInvocationError:
            raise
        except Exception as e:
            logger.info("web_search backend failed", exc_info=True)
            raise ToolInvocationError(
                f"web_search failed: {type(e).__name__}: {e}".rstrip(": ")
            ) from None
        return _format_results(query, _coerce_results(raw)[:max_results])

    return tool(
        web_search,
        name="web_search",
        annotations=WEB_SEARCH_ANNOTATIONS,
        source=builtin_source("web"),
    )


# --------------------------------------------------------------------------- native search


class NativeWebSearch(BaseModel):
    """A provider-native web search: the provider searches, no function runs here.

    Not a :class:`~deputy_shiny.tools.Tool`. The agent authorizes it once, when it is
    registered, and then adds :meth:`request_kwargs` to every ``litellm.acompletion``
    call (litellm translates ``web_search_options`` for each provider). Its name is
    ``web_search``, so permission rules written for the universal tool apply to it.

    Unbound (``provider`` and ``model`` None, as :func:`tools_web` makes it) it is a
    request: the agent registering it asks its own model whether it searches natively
    and binds it to that model (:func:`bind_native_web_search`), or registers the
    universal ``web_search`` in its place. Tools never look at a model themselves.

    Examples:
        >>> native = NativeWebSearch(provider="openai", model="openai/gpt-4o-search-preview")
        >>> native.name, native.request_kwargs()
        ('web_search', {'web_search_options': {'search_context_size': 'medium'}})
        >>> NativeWebSearch().bound
        False
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Literal["web_search"] = "web_search"
    provider: str | None = None
    model: str | None = None
    web_search_options: dict[str, Any] = Field(
        default_factory=lambda: {"search_context_size": "medium"}
    )

    @property
    def bound(self) -> bool:
        """True once it names the provider and model that search (see the class doc)."""
        return self.provider is not None and self.model is not None

    @property
    def annotations(self) -> ToolAnnotations:
        """The same annotations as the universal ``web_search`` tool."""
        return WEB_SEARCH_ANNOTATIONS

    def request_kwargs(self) -> dict[str, Any]:
        """The keyword arguments to add to ``litellm.acompletion`` (a fresh copy)."""
        return {"web_search_options": dict(self.web_search_options)}


def bind_native_web_search(
    request: NativeWebSearch, *, supported: bool, provider: str, model: str
) -> NativeWebSearch | Tool:
    """What an unbound :class:`NativeWebSearch` becomes for one agent's model.

    The agent passes in its model's answer (``supported``, from
    :func:`deputy_shiny.models.supports_native_web_search`) and the model's provider and
    model string: native search bound to them, or a fresh universal ``web_search`` when
    the model does not search natively. A bound one is returned as it is.

    Examples:
        >>> request = NativeWebSearch()
        >>> bind_native_web_search(request, supported=True, provider="openai", model="o/x").model
        'o/x'
        >>> bind_native_web_search(request, supported=False, provider="openai", model="x").name
        'web_search'
    """
    if request.bound:
        return request
    if not supported:
        return tool_web_search()
    return request.model_copy(update={"provider": provider, "model": model})
