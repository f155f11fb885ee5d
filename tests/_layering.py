"""The dependency rules of ARCHITECTURE.md, checked on source text with ``ast``.

Nothing here imports the modules it checks: :func:`import_graph` reads every ``.py``
file under a root (``deputy_shiny/``, ``app.py``, ``components/``) and records each
import, module-level or inside a function, ``TYPE_CHECKING`` blocks included. The
``check_*`` functions take that root and return readable violations (empty: fine), so
a test can run them on the real tree and on a synthetic one made to break each rule.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "deputy_shiny"
KIT = f"{PACKAGE}.shiny"
# What the runtime must never import: the kit, the UI libraries, the reference app.
UI_IMPORTS = (KIT, "shiny", "shinychat", "app", "components")
# Modules that hold policy or tools (MCP tools included), and what they must not import.
# The hooks* modules are matched by name prefix (see _is_policy).
POLICY_MODULES = (
    f"{PACKAGE}.tools",
    f"{PACKAGE}.mcp",
    f"{PACKAGE}.permissions",
    f"{PACKAGE}.sandbox",
)
ENGINE_MODULES = (f"{PACKAGE}.agent", f"{PACKAGE}._engine", f"{PACKAGE}.models")
TEST_MODELS = (f"{PACKAGE}.testing", f"{PACKAGE}.models.scripted")


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen in ``source`` at ``line``."""

    source: str
    target: str
    line: int


def module_name(root: Path, path: Path) -> str:
    """``deputy_shiny/tools/files.py`` -> ``deputy_shiny.tools.files`` (``__init__`` dropped)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path) -> dict[str, Path]:
    """Every production module under ``root``: the package, ``app.py``, ``components/``."""
    paths = [*(root / PACKAGE).rglob("*.py"), *(root / "components").rglob("*.py")]
    if (root / "app.py").exists():
        paths.append(root / "app.py")
    return {module_name(root, p): p for p in sorted(paths) if "__pycache__" not in p.parts}


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, *([name] if name else [])])


def imports_of(module: str, path: Path, known: Iterable[str]) -> list[Import]:
    """Every import in one file (any depth), resolved to absolute module names.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module
    of the tree, else ``pkg`` itself.
    """
    modules = set(known)
    found: list[Import] = []
    parsed = _parsed_imports(module, path.name == "__init__.py", path.read_text(), str(path))
    for base, names, line, is_from in parsed:
        if not is_from:
            found.extend(Import(module, name, line) for name in names)
            continue
        for name in names:
            candidate = f"{base}.{name}"
            found.append(Import(module, candidate if candidate in modules else base, line))
    return found


@functools.lru_cache(maxsize=4096)
def _parsed_imports(
    module: str, is_package: bool, text: str, filename: str
) -> tuple[tuple[str, tuple[str, ...], int, bool], ...]:
    """One file's import statements as ``(base, names, line, is_from)``, relative ones
    resolved. Cached on the file's text: every rule reads the whole tree again, and
    parsing it is most of a check's cost (an edited file is a new key)."""
    found: list[tuple[str, tuple[str, ...], int, bool]] = []
    for node in ast.walk(ast.parse(text, filename)):
        if isinstance(node, ast.Import):
            found.append(("", tuple(alias.name for alias in node.names), node.lineno, False))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            names = tuple(alias.name for alias in node.names)
            found.append((base, names, node.lineno, True))
    return tuple(found)


def import_graph(root: Path) -> dict[str, list[Import]]:
    """Each production module's imports (third-party ones included)."""
    files = source_files(root)
    return {name: imports_of(name, path, files) for name, path in files.items()}


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _show(imp: Import) -> str:
    return f"{imp.source}:{imp.line} imports {imp.target}"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --------------------------------------------------------------------------- rules


def check_ui_direction(root: Path, allowed: Iterable[str] = ()) -> list[str]:
    """Rule 1: no runtime module (the package outside ``shiny/``) imports the kit, shiny,
    shinychat, app.py or components/. ``allowed`` names modules exempt on purpose."""
    exempt = set(allowed)
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _within(module, [PACKAGE]) and not _within(module, [KIT]) and module not in exempt
        for imp in imps
        if _within(imp.target, UI_IMPORTS)
    )


def _is_policy(module: str) -> bool:
    """tools/, mcp/, permissions, sandbox/ and every ``hooks*`` module (a new ``hooks_x.py``
    inherits the rule as a new module under ``tools/`` does)."""
    return _within(module, POLICY_MODULES) or module.startswith(f"{PACKAGE}.hooks")


def check_policy_independence(root: Path, allowed: Iterable[str] = ()) -> list[str]:
    """Rule 2: tools/, mcp/, permissions, hooks*, and sandbox import nothing of agent/,
    _engine/ or models/ (module or package). ``allowed`` holds ``"module -> target"``
    pairs exempt for now."""
    exempt = set(allowed)
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _is_policy(module)
        for imp in imps
        if _within(imp.target, ENGINE_MODULES) and f"{module} -> {imp.target}" not in exempt
    )


def check_no_test_models(root: Path, allowed: Iterable[str] = ()) -> list[str]:
    """Rule 3: production modules import nothing from testing.py or models/scripted.py
    (those two themselves, and ``allowed``, excepted)."""
    exempt = set(allowed) | set(TEST_MODELS)
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if module not in exempt
        for imp in imps
        if _within(imp.target, TEST_MODELS)
    )


UTIL = f"{PACKAGE}._util"
UTIL_MAY_IMPORT = (f"{PACKAGE}.errors", UTIL)


def check_util_leaves(root: Path) -> list[str]:
    """Rule 6: ``_util/`` (the small leaves) imports nothing of the package but
    ``errors`` and itself; a new module under ``_util/`` inherits the rule."""
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _within(module, [UTIL])
        for imp in imps
        if _within(imp.target, [PACKAGE]) and not _within(imp.target, UTIL_MAY_IMPORT)
    )


ENGINE = f"{PACKAGE}._engine"
ENGINE_MUST_NOT_IMPORT = (f"{PACKAGE}.agent", KIT)


def check_engine_independence(root: Path) -> list[str]:
    """Rule 7: ``_engine/`` (the run loop) imports neither ``agent`` nor the kit: it reads
    RunDeps, never an Agent; a new module under ``_engine/`` inherits the rule."""
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _within(module, [ENGINE])
        for imp in imps
        if _within(imp.target, ENGINE_MUST_NOT_IMPORT)
    )


MODELS = f"{PACKAGE}.models"
MODELS_MUST_NOT_IMPORT = (f"{PACKAGE}.agent", ENGINE)


def check_models_independence(root: Path) -> list[str]:
    """Rule 8: ``models/`` (everything behind a model string, the litellm wire included)
    imports neither ``agent`` nor ``_engine``: the engine calls the wire, never the
    reverse; a new module under ``models/`` inherits the rule."""
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _within(module, [MODELS])
        for imp in imps
        if _within(imp.target, MODELS_MUST_NOT_IMPORT)
    )


def check_no_root_imports(root: Path) -> list[str]:
    """Rule 10: no module of the package imports the package root (``from .. import
    __version__``): the root re-exports everything, so such an import always points up
    (the root's own names live in leaves, e.g. ``_util/version.py``)."""
    return _unique(
        _show(imp)
        for module, imps in import_graph(root).items()
        if _within(module, [PACKAGE]) and module != PACKAGE
        for imp in imps
        if imp.target == PACKAGE
    )


def folder_of(module: str) -> str:
    """The top-level unit a module belongs to: ``deputy_shiny.tools.web`` ->
    ``deputy_shiny.tools``; a top-level module (``deputy_shiny.usage``) is its own."""
    return ".".join(module.split(".")[:2])


def folder_cycles(root: Path) -> list[frozenset[str]]:
    """Rule 9: the import cycles between folders (and top-level modules), lazy and
    TYPE_CHECKING imports included: ``a/x.py -> b/y.py`` and ``b/z.py -> a/w.py`` is a
    cycle between ``a`` and ``b`` even when no module cycle exists. The root
    ``__init__`` is left out, as in :func:`import_cycles`."""
    graph = import_graph(root)
    library = {m for m in graph if _within(m, [PACKAGE]) and m != PACKAGE}
    folders = {folder_of(m) for m in library}
    edges: dict[str, set[str]] = {f: set() for f in folders}
    for module in library:
        for imp in graph[module]:
            if not _within(imp.target, [PACKAGE]) or imp.target == PACKAGE:
                continue
            target = folder_of(imp.target)
            if target in folders and target != folder_of(module):
                edges[folder_of(module)].add(target)
    return _strongly_connected(edges)


def check_folder_cycles(root: Path) -> list[str]:
    """Rule 9 as violations, one line per cycle."""
    return ["folder cycle: " + " <-> ".join(sorted(c)) for c in folder_cycles(root)]


def import_cycles(root: Path) -> list[frozenset[str]]:
    """Rule 4: the import cycles among the package's modules (strongly connected
    components of more than one module), lazy and TYPE_CHECKING imports included.

    Importing ``a.b.c`` also runs ``a.b`` (a sub-package's ``__init__``), so that edge
    counts too; the root package's ``__init__`` (which re-exports everything) is left
    out, as every module "imports" it.
    """
    graph = import_graph(root)
    library = {m for m in graph if _within(m, [PACKAGE]) and m != PACKAGE}
    edges: dict[str, set[str]] = {m: set() for m in library}
    for module in library:
        for imp in graph[module]:
            target = imp.target
            while target not in library and "." in target:
                target = target.rsplit(".", 1)[0]  # pkg.mod.attr -> pkg.mod
            if target not in library or target == module:
                continue
            edges[module].add(target)
            parent = target.rsplit(".", 1)[0]
            while parent != PACKAGE and parent in library and not _within(module, [parent]):
                edges[module].add(parent)
                parent = parent.rsplit(".", 1)[0]
    return _strongly_connected(edges)


def _strongly_connected(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iteratively; only components of two or more nodes."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def check_cycles(root: Path, known: Iterable[frozenset[str]] = ()) -> list[str]:
    """Rule 4 as violations: every cycle that is not exactly one of ``known``."""
    allowed = set(known)
    return [
        "import cycle: " + " <-> ".join(sorted(cycle))
        for cycle in import_cycles(root)
        if cycle not in allowed
    ]


def heavy_imports(root: Path, package: str = PACKAGE) -> list[str]:
    """Rule 5: which of shiny, shinychat, litellm and the MCP SDK (``mcp``)
    ``import <package>`` loads, in a fresh interpreter with ``root`` first on the path."""
    code = (
        f"import sys, {package}\n"
        "heavy = ('shiny', 'shinychat', 'litellm', 'mcp')\n"
        "print(' '.join(h for h in heavy if h in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.split()
