"""Your own app on Posit Connect: put deputy_shiny beside it, with pinned requirements.

Connect builds an app's environment from the ``requirements.txt`` in its bundle, so
``pip freeze``'s ``deputy_shiny @ file:///...`` (a path on your machine) cannot install
there. :func:`connect_bundle` (the command ``deputy connect-bundle APP_DIR``) makes the
app folder deployable as it is:

- it copies the installed ``deputy_shiny`` package (its source, static files and
  migrations; no caches) into ``APP_DIR/deputy_shiny/``, where the app imports it from
  (Connect runs the app with its folder on the import path), marked as a copy so that a
  later run may replace it (a folder of that name that is not such a copy is never
  touched);
- it writes ``APP_DIR/requirements.txt``: your own lines as they were (a line installing
  deputy_shiny itself is dropped: the copy replaces it), then deputy_shiny's runtime
  dependencies pinned to the versions installed here, the ones you ran the app with (a
  dependency you pin yourself keeps your line). Running it again replaces that block.

- it writes ``APP_DIR/.python-version`` (this Python's ``major.minor``) when the app has
  none, so Connect runs the Python you ran with.

Then deploy as the documentation's Install and deploy page says, for Core and Express
apps alike, with ``rsconnect deploy shiny APP_DIR`` (or ``rsconnect write-manifest shiny
APP_DIR`` for a Git-backed deploy) and no ``--entrypoint``: rsconnect finds it (``app``
for a Core app, shiny's Express wrapper ``shiny.express.app:app_2e_py`` for an Express
one), and the manifest's entrypoint is what Connect runs.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> app = Path(tempfile.mkdtemp())
    >>> _ = (app / "app.py").write_text("from shiny.express import ui\\n")
    >>> done = connect_bundle(app)
    >>> (app / "deputy_shiny" / "__init__.py").is_file(), done.requirements.name
    (True, 'requirements.txt')
    >>> any(line.startswith("shiny==") for line in done.pinned)
    True
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from .errors import ConfigurationError

__all__ = ["BundleResult", "connect_bundle", "main"]

PACKAGE = "deputy_shiny"
MARKER = ".deputy-connect-bundle"
"""The file that marks a copied package (its content: the copied version)."""
BLOCK_START = "# --- deputy_shiny's dependencies (written by `deputy connect-bundle`) ---"
BLOCK_END = "# --- end of deputy_shiny's dependencies ---"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SKIP = ("__pycache__", "*.pyc", "*.pyo")


@dataclass(frozen=True)
class BundleResult:
    """What :func:`connect_bundle` did.

    Attributes:
        package: The copied package folder (``APP_DIR/deputy_shiny``).
        requirements: The written ``requirements.txt``.
        pinned: deputy_shiny's dependency lines it wrote (``name==version``, markers kept).
        kept: deputy_shiny dependencies the app pins itself (its line was kept).
        dropped: Lines of the app's file that installed deputy_shiny itself (removed).
    """

    package: Path
    requirements: Path
    pinned: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def connect_bundle(app_dir: str | Path) -> BundleResult:
    """Make ``app_dir`` deployable to Posit Connect (see the module docs).

    Raises:
        ConfigurationError: ``app_dir`` is not a folder holding an ``app.py`` (or another
            ``.py`` entrypoint), or it already has a ``deputy_shiny`` folder that this
            command did not write (your own source is never overwritten).
    """
    app = Path(app_dir).resolve()
    if not app.is_dir():
        raise ConfigurationError(f"{app_dir}: no such folder (give the folder of your app.py)")
    if not any(app.glob("*.py")):
        raise ConfigurationError(f"{app_dir}: no app here (no .py file in the folder)")
    source = Path(__file__).resolve().parent
    target = app / PACKAGE
    if target.resolve() != source:  # in the project's own checkout it is there already
        _copy_package(source, target)
    python_version = app / ".python-version"
    if not python_version.exists():
        python_version.write_text(f"{sys.version_info.major}.{sys.version_info.minor}\n")
    return _write_requirements(app / "requirements.txt", target)


def _copy_package(source: Path, target: Path) -> None:
    if target.exists() or target.is_symlink():
        if target.is_symlink() or not (target / MARKER).is_file():
            raise ConfigurationError(
                f"{target} exists and was not written by `deputy connect-bundle`: move it "
                "away (the bundle needs that name for the package copy)"
            )
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*_SKIP))
    (target / MARKER).write_text(_version() + "\n")


def _version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "source"


def _write_requirements(path: Path, package: Path) -> BundleResult:
    own = _own_lines(path.read_text().splitlines() if path.is_file() else [])
    dropped = [line for line in own if _installs_deputy(line)]
    own = [line for line in own if not _installs_deputy(line)]
    named = {_name(line) for line in own} - {None}
    pinned: list[str] = []
    kept: list[str] = []
    for requirement in _runtime_requirements():
        spec, _, marker = requirement.partition(";")
        key = _name(spec)
        if key is None:  # not a named requirement: nothing to pin
            continue
        if key in named:
            kept.append(key)
            continue
        pinned.append(_pin(key, spec.strip(), marker.strip()))
    body = "\n".join(own).rstrip("\n")
    block = "\n".join([BLOCK_START, *pinned, BLOCK_END])
    path.write_text((f"{body}\n\n" if body else "") + block + "\n")
    return BundleResult(package, path, pinned, kept, dropped)


def _own_lines(lines: list[str]) -> list[str]:
    """The file's lines outside the block an earlier run wrote."""
    kept, inside = [], False
    for line in lines:
        if line.strip() == BLOCK_START:
            inside = True
        elif line.strip() == BLOCK_END:
            inside = False
        elif not inside:
            kept.append(line)
    return kept


def _installs_deputy(line: str) -> bool:
    """A line that installs deputy_shiny itself: by name (``deputy_shiny @ file:///...``,
    ``deputy-shiny==0.1``) or by path (``-e ../deputy_shiny``, a wheel file)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return False
    if _name(text) == "deputy-shiny":
        return True
    by_path = text.startswith(("-e", ".", "/")) or "file:" in text
    return by_path and "deputy_shiny" in text.replace("-", "_").lower()


def _name(line: str) -> str | None:
    text = line.strip()
    if not text or text.startswith(("#", "-")):
        return None
    match = _NAME.match(text)
    return _normalize(match.group(1)) if match else None


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _runtime_requirements() -> list[str]:
    """deputy_shiny's dependencies without an extra (from its installed metadata)."""
    try:
        declared = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        raise ConfigurationError(
            "deputy_shiny is not installed (pip install it, then run this again): its "
            "dependencies are read from the installed package"
        ) from None
    return [r for r in declared if "extra ==" not in r.replace('"', "'").replace("'", "")]


def _pin(key: str, requirement: str, marker: str) -> str:
    """``name==installed`` (with the marker); the declared range when it is not installed
    here (a dependency for another platform)."""
    try:
        pinned = f"{key}=={metadata.version(key)}"
    except metadata.PackageNotFoundError:
        pinned = requirement
    return f"{pinned}; {marker}" if marker else pinned


def main(argv: Sequence[str]) -> int:
    """``deputy connect-bundle APP_DIR``: the command's exit status (2 on a bad folder).

    Examples:
        >>> main(["/nonexistent/app"])  # stderr: deputy connect-bundle: ... no such folder
        2
    """
    parser = argparse.ArgumentParser(
        prog="deputy connect-bundle",
        description="Put deputy_shiny and its pinned requirements beside your app, for "
        "Posit Connect.",
    )
    parser.add_argument("app_dir", help="the folder of your app.py")
    options = parser.parse_args(list(argv))
    try:
        done = connect_bundle(options.app_dir)
    except ConfigurationError as exc:
        print(f"deputy connect-bundle: {exc}", file=sys.stderr)
        return 2
    print(f"Copied deputy_shiny {_version()} to {done.package}")
    print(f"Wrote {done.requirements} ({len(done.pinned)} pinned dependencies)")
    for name in done.kept:
        print(f"  kept your own line for {name}")
    for line in done.dropped:
        print(f"  dropped {line.strip()!r}: the copy replaces it")
    # No --entrypoint: rsconnect tells an Express app (shiny's wrapper) from a Core one.
    print(f"Next: rsconnect deploy shiny {options.app_dir} (it finds the entrypoint)")
    return 0
