"""The library's docstrings and comments say their rules; they cite no outside document.

A reader of an installed deputy_shiny has only the package: a pointer to the team's
architecture notes, a spec folder, an issue number or a numbered rule elsewhere tells
them nothing. The rule itself belongs in the text.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "deputy_shiny"

# Each pattern names a kind of outside reference.
OUTSIDE_REFERENCES = {
    "the team's shared folder": r"\.\./shared|\bshared/",
    "the spec folder": r"\bspec/|\bR docs\b",
    "the architecture notes": r"\bARCHITECTURE\b|ARCHITECTURE\.md",
    "the contracts page": r"\bCONTRACTS\b|CONTRACTS\.md|§",
    "a numbered rule of another page": r"\b[Rr]ule \d+\b",
    "an issue number": r"\b[Ii]ssue\s*#?\d+|(?<![\w&#])#\d{1,4}\b(?![\w-])",
    "an issue by name": r"(?i:\b(?:this|that|the [\w-]+) issue\b)",
}
PATTERN = re.compile("|".join(f"(?:{p})" for p in OUTSIDE_REFERENCES.values()))


def prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python source, as ``(line, text)`` pairs."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, statement in enumerate(body):
            is_string = isinstance(statement, ast.Expr) and isinstance(
                statement.value, ast.Constant
            )
            if not (is_string and isinstance(statement.value.value, str)):
                continue
            # A docstring opens a module, class or function; an attribute docstring
            # follows an assignment.
            opens = index == 0 and isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            )
            follows = index > 0 and isinstance(body[index - 1], ast.Assign | ast.AnnAssign)
            if opens or follows:
                found.append((statement.lineno, statement.value.value))
    return found


# Block comments (CSS, JS, HTML) and JS line comments: a // after code or at a line's
# start, not inside a URL ("https://").
_FRONT_END_COMMENT = re.compile(r"/\*.*?\*/|<!--.*?-->|(?<![:\w\\])//[^\n]*", re.S)


def outside_references(root: Path) -> list[str]:
    """Every comment or docstring under ``root`` that cites an outside document."""
    hits: list[str] = []
    for path in sorted(root.rglob("*")):
        if path.suffix == ".py":
            texts = prose(path.read_text())
        elif path.suffix in {".js", ".css", ".html"}:
            # Front-end files: their comments only; a colour like #000 is not an issue.
            texts = [(1, comment) for comment in _FRONT_END_COMMENT.findall(path.read_text())]
        else:
            continue
        for line, text in texts:
            for match in PATTERN.finditer(text):
                hits.append(f"{path.relative_to(root)}:{line}: {match.group(0)!r}")
    return hits


def test_no_docstring_or_comment_cites_an_outside_document() -> None:
    assert outside_references(PACKAGE) == []


@pytest.mark.parametrize(
    "text",
    [
        "# Held weakly (ARCHITECTURE rule 9).",
        "# See ../shared/CONTRACTS.md for the table.",
        '"""The decision table of CONTRACTS §4."""',
        '"""As the spec/ folder says."""',
        "# Fixed in #20.",
        "# The security issue asked for this.",
        "# The same limits below it (rule 10).",
        "# As the R docs say.",
    ],
)
def test_it_finds_each_kind_of_reference(tmp_path: Path, text: str) -> None:
    (tmp_path / "module.py").write_text(f"{text}\nVALUE = 1\n")
    assert outside_references(tmp_path) != []


def test_it_reads_docstrings_and_comments_but_not_code(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text(
        '"""A module."""\n'
        "\n"
        'COLOUR = "#212529"  # a colour\n'
        '"""The rule: one task owns each session."""\n'
        "\n"
        "def f(spec: str) -> str:\n"
        '    """Return the spec string, unchanged."""\n'
        "    issue = spec\n"
        "    return issue\n"
    )
    (tmp_path / "style.css").write_text(".x { color: #212529; background: #000; } /* 2 */\n")
    (tmp_path / "app.js").write_text('fetch("https://x/#12"); // a comment\n')
    assert outside_references(tmp_path) == []
    (tmp_path / "more.css").write_text(".y { color: #000; } /* fixed in #20 */\n")
    (tmp_path / "more.js").write_text("run(); // see CONTRACTS.md\n")
    assert len(outside_references(tmp_path)) == 2  # comments are still read
