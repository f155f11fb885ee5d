"""The size rule of issue #20: no module over 900 lines, no function over 120.

A long module or function is where a hidden state machine or a second concern
grows unnoticed, so the limits are checked, not just stated. Sources are read with
``ast`` (nothing is imported): every ``.py`` file under ``deputy_shiny/`` and
``components/``, and ``app.py``. A function's length runs from its ``def`` line to
its last line (decorators not counted); nested functions, methods and ``async def``
count on their own, and an outer function's length includes what it nests.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 900
MAX_FUNCTION_LINES = 120


def checked_files(root: Path) -> Iterator[Path]:
    """Every Python source file the rule covers, in a stable order."""
    for folder in ("deputy_shiny", "components"):
        yield from sorted((root / folder).rglob("*.py"))
    app = root / "app.py"
    if app.exists():
        yield app


def source_violations(name: str, source: str) -> list[str]:
    """Readable violations of the size rule in one module's ``source`` (empty: fine)."""
    found: list[str] = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: module has {lines} lines (max {MAX_MODULE_LINES})")
    functions = [
        node
        for node in ast.walk(ast.parse(source, filename=name))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for node in sorted(functions, key=lambda node: node.lineno):
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            found.append(
                f"{name}:{node.lineno} function {node.name} has {length} lines"
                f" (max {MAX_FUNCTION_LINES})"
            )
    return found


def size_violations(root: Path) -> list[str]:
    """All violations under ``root``, each naming the file (relative) and function."""
    found: list[str] = []
    for path in checked_files(root):
        name = path.relative_to(root).as_posix()
        found.extend(source_violations(name, path.read_text(encoding="utf-8")))
    return found


# --------------------------------------------------------------------------- the real tree


def test_no_module_over_900_lines_and_no_function_over_120() -> None:
    violations = size_violations(ROOT)
    assert not violations, "split these:\n" + "\n".join(violations)


def test_the_rule_has_subjects() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in checked_files(ROOT)}
    assert "app.py" in names
    assert "deputy_shiny/agent/_agent.py" in names  # nested folders are walked
    assert any(name.startswith("components/") for name in names)


# --------------------------------------------------------------------------- the checker


def _function(name: str, body_lines: int, *, indent: str = "", prefix: str = "def") -> str:
    """A function whose def line plus ``body_lines`` statements span ``body_lines + 1`` lines."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}{prefix} {name}() -> None:\n{body}"


def test_a_function_of_exactly_120_lines_passes() -> None:
    assert source_violations("ok.py", _function("fits", 119)) == []


def test_a_long_function_is_named_with_its_file_and_line() -> None:
    source = "import os\n\n" + _function("too_long", 120)
    assert source_violations("pkg/mod.py", source) == [
        "pkg/mod.py:3 function too_long has 121 lines (max 120)"
    ]


def test_nested_async_functions_and_methods_are_checked() -> None:
    inner = _function("inner", 121, indent="    ", prefix="async def")
    method = _function("method", 121, indent="    ")
    source = "def outer() -> None:\n" + inner + "\nclass C:\n" + method
    assert source_violations("n.py", source) == [
        "n.py:1 function outer has 123 lines (max 120)",
        "n.py:2 function inner has 122 lines (max 120)",
        "n.py:126 function method has 122 lines (max 120)",
    ]


def test_a_long_module_is_named() -> None:
    source = "".join(f"x{i} = {i}\n" for i in range(901))
    assert source_violations("big.py", source) == ["big.py: module has 901 lines (max 900)"]
    assert source_violations("fits.py", source.replace("x900 = 900\n", "")) == []


def test_the_tree_walk_finds_violations_in_app_components_and_package(tmp_path: Path) -> None:
    long_fn = _function("f", 121)
    (tmp_path / "deputy_shiny" / "sub").mkdir(parents=True)
    (tmp_path / "components").mkdir()
    (tmp_path / "deputy_shiny" / "sub" / "m.py").write_text(long_fn)
    (tmp_path / "components" / "c.py").write_text(long_fn)
    (tmp_path / "app.py").write_text(long_fn)
    (tmp_path / "deputy_shiny" / "short.py").write_text(_function("g", 3))
    assert size_violations(tmp_path) == [
        "deputy_shiny/sub/m.py:1 function f has 122 lines (max 120)",
        "components/c.py:1 function f has 122 lines (max 120)",
        "app.py:1 function f has 122 lines (max 120)",
    ]
