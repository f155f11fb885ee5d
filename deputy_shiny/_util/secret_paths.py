"""The server's own secrets on disk, which no agent may reach whatever its working directory.

The record key (``$XDG_STATE_HOME/deputy_shiny/record.key``, by default under
``~/.local/state``) authenticates every saved record: whoever reads it can forge them.
People run the ``deputy`` command from their home directory, so a working directory
may well hold the key's folder. :func:`protected_paths` lists what is out of reach:

* the folder of the default record key file, always (computed at each call, so a
  changed ``XDG_STATE_HOME`` counts), and
* every path the process registered with :func:`protect_path`: the folder of a record
  key file it read, the kit's records folder (its token key, every conversation record).

Path confinement (``deputy_shiny._paths``) refuses them to every file tool, walks skip
them, and the sandbox mounts an empty folder over them.

Examples:
    >>> import os
    >>> os.environ["XDG_STATE_HOME"] = "/srv/state"
    >>> str(default_key_dir())
    '/srv/state/deputy_shiny'
    >>> protected_root("/srv/state/deputy_shiny/record.key") == default_key_dir()
    True
    >>> protected_root("/srv/state/other.txt") is None
    True
    >>> del os.environ["XDG_STATE_HOME"]
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["default_key_dir", "protect_path", "protected_paths", "protected_root"]

_registered: set[Path] = set()
_lock = threading.Lock()


def default_key_dir() -> Path:
    """The folder of the default record key file: ``$XDG_STATE_HOME/deputy_shiny``
    (``~/.local/state/deputy_shiny`` when XDG_STATE_HOME is unset or relative)."""
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    if state and os.path.isabs(state):
        base = Path(state)
    else:
        base = Path(os.path.expanduser("~")) / ".local" / "state"
    return base / "deputy_shiny"


def protect_path(path: str | os.PathLike[str]) -> None:
    """Put ``path`` (a folder or a file) out of every agent's reach for this process's life.

    Examples:
        >>> protect_path("/srv/kit/records")
        >>> protected_root("/srv/kit/records/.token-key")
        PosixPath('/srv/kit/records')
    """
    real = Path(os.path.realpath(path))
    with _lock:
        _registered.add(real)


def protected_paths() -> tuple[Path, ...]:
    """Every protected path, symlinks resolved, sorted."""
    with _lock:
        found = set(_registered)
    found.add(Path(os.path.realpath(default_key_dir())))
    return tuple(sorted(found))


def protected_root(
    path: str | os.PathLike[str], protected: tuple[Path, ...] | None = None
) -> Path | None:
    """The protected path that ``path`` (absolute, symlinks resolved) is or lies in, or
    None. ``protected`` defaults to :func:`protected_paths` (pass it when checking many)."""
    target = Path(path)
    for secret in protected_paths() if protected is None else protected:
        if target == secret or target.is_relative_to(secret):
            return secret
    return None
