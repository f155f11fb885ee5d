"""The installed deputy_shiny's version, for the records and handshakes that name it.

A leaf, so that a part deep in the package (a saved session's metadata, an MCP client's
``client_info``) can name the version without importing the package root above it.

Examples:
    >>> from deputy_shiny._util.version import package_version
    >>> isinstance(package_version(), str)
    True
"""

from __future__ import annotations

from functools import cache

__all__ = ["package_version"]


@cache
def package_version() -> str:
    """The installed distribution's version (``"0.0.0"`` in a tree that is not installed)."""
    # importlib.metadata (with zipfile, email, csv) costs ~50 ms to import: only on demand.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("deputy_shiny")
    except PackageNotFoundError:  # pragma: no cover - only in a tree that is not installed
        return "0.0.0"
