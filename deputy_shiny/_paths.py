"""Path confinement: where a file tool may read or write, decided before anything runs.

One function, :func:`confine`, serves both the permission check (step 3 of the
evaluation, a hard deny) and the file tools themselves (defence in depth). A path is
resolved against the working directory and must land inside one of the allowed roots,
comparing whole path components after following symlinks (dangling ones too), so:

* ``..`` anywhere in the path is refused outright (rule ``traversal``), even when it
  would resolve back inside: a model has no business walking up;
* ``~``-paths are refused (rule ``home``): they look like the home directory;
* absolute paths outside every root are refused (rule ``outside``);
* a symlink, existing or dangling, that leads outside is refused (rule ``symlink``);
* the server's own secrets are refused even inside a root (rule ``secret``): the record
  key's folder and the kit's records (:mod:`deputy_shiny._util.secret_paths`), so a
  working directory of ``$HOME`` does not hand the model the key that signs records;
* ``/data2`` is not inside ``/data`` (rule ``outside``: components, not prefixes);
* empty paths, NUL bytes and other control characters are refused (rule ``invalid``);
* a path that changes while it is resolved (a component flipping between a link and a
  directory) is refused (rule ``symlink``), and any other error of the file system
  while resolving is refused too (rule ``invalid``): ``confine`` never raises
  ``OSError``.

``confine`` checks names; it does not open anything. The file tools then open what it
returned through :mod:`deputy_shiny._util.safe_fs`, relative to a descriptor of the root with
no symlink followed at any component, so what is opened is what was checked.

Backslashes count as separators, so ``..\\..\\etc`` is traversal too.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp()).resolve()
    >>> confine("notes/a.txt", root, [root]) == root / "notes" / "a.txt"
    True
    >>> try:
    ...     confine("../etc/passwd", root, [root])
    ... except PathDenied as exc:
    ...     print(exc.rule)
    traversal
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from ._util.secret_paths import protected_paths, protected_root
from .errors import PathDenied


def real_roots(roots: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """The roots with symlinks resolved (``/tmp`` may itself be a link)."""
    return tuple(Path(os.path.realpath(root)) for root in roots)


def _resolution_denied(text: str, exc: OSError) -> PathDenied:
    """Why resolving ``text`` failed, as a denial (never an ``OSError`` for the caller)."""
    if exc.errno in (errno.EINVAL, errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
        # readlink on something that stopped being a link after lstat said it was one, or
        # a loop: the path is changing under us, as a swap race would make it.
        return PathDenied(
            f"Path {text!r} changed while it was being checked (a symbolic link appeared "
            "or disappeared on the way); it is refused. Try again once it is stable.",
            rule="symlink",
            path=text,
        )
    reason = exc.strerror or type(exc).__name__
    return PathDenied(
        f"Path {text!r} cannot be checked ({reason}); it is refused.", rule="invalid", path=text
    )


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def confine(
    path: str | os.PathLike[str],
    working_dir: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    *,
    what: str = "access",
) -> Path:
    """Resolve ``path`` against ``working_dir``; raise :class:`PathDenied` unless inside ``roots``.

    Returns the resolved (real) path. ``what`` ("read", "write") words the message.
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise PathDenied("The path is empty.", rule="invalid", path=str(text))
    if any(ord(ch) < 32 for ch in text):
        raise PathDenied("The path contains control characters.", rule="invalid", path=text)
    normalised = text.replace("\\", "/")
    parts = PurePosixPath(normalised).parts
    if ".." in parts:
        raise PathDenied(
            f"Path {text!r} uses '..' to leave its directory; give a path inside the "
            "working directory instead.",
            rule="traversal",
            path=text,
        )
    if normalised.startswith("~"):
        raise PathDenied(
            f"Path {text!r} points into a home directory; only the working directory is allowed.",
            rule="home",
            path=text,
        )
    try:
        return _confine_resolved(text, normalised, working_dir, roots, what)
    except OSError as exc:
        raise _resolution_denied(text, exc) from None
    except ValueError:  # e.g. a lone surrogate the file system cannot encode
        raise PathDenied(
            f"Path {text!r} holds characters no file name can have.", rule="invalid", path=text
        ) from None
    except RecursionError:  # a pathological chain of links
        raise PathDenied(
            f"Path {text!r} goes through too many symbolic links; it is refused.",
            rule="symlink",
            path=text,
        ) from None


def _confine_resolved(
    text: str,
    normalised: str,
    working_dir: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]],
    what: str,
) -> Path:
    allowed = real_roots(roots)
    if not allowed:
        raise PathDenied(
            f"No directory is allowed to {what} here, so {text!r} is refused.",
            rule="outside",
            path=text,
        )
    base = Path(os.path.realpath(working_dir))
    lexical = Path(os.path.normpath(base / normalised))
    if not _inside(lexical, allowed):
        raise PathDenied(
            f"Path {text!r} is outside the directories this agent may {what} "
            f"({', '.join(str(r) for r in allowed)}).",
            rule="outside",
            path=text,
        )
    real = Path(os.path.realpath(lexical))
    if not _inside(real, allowed):
        raise PathDenied(
            f"Path {text!r} goes through a symbolic link that leads outside the "
            f"directories this agent may {what}.",
            rule="symlink",
            path=text,
        )
    secrets = protected_paths()
    if protected_root(lexical, secrets) is not None or protected_root(real, secrets) is not None:
        raise secret_denied(text)
    return real


def secret_denied(text: str) -> PathDenied:
    """The denial of a path holding the server's own secrets (the record key's folder)."""
    return PathDenied(
        f"Path {text!r} holds the server's own keys or records; no agent may "
        "read or write there, whatever its working directory.",
        rule="secret",
        path=text,
    )
