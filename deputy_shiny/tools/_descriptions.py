"""Tool descriptions as the model reads them: cleaned docstrings and schema descriptions.

A tool's description is its docstring's first paragraph(s) without doctest examples
and ``Args:``/``Returns:``/``Example:`` sections; parameter descriptions come from the
``Args:`` section; the JSON schema's own descriptions get the same cleaning. Used by
:mod:`deputy_shiny.tools._function_schema` and :func:`~deputy_shiny.tools.tool`.

Examples:
    >>> doc = "Add two numbers.\\n\\nArgs:\\n    a: The first number.\\n"
    >>> docstring_summary(doc), parameter_descriptions(doc)
    ('Add two numbers.', {'a': 'The first number.'})
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import docstring_parser

__all__ = [
    "clean_description",
    "clean_schema_descriptions",
    "describe_schema",
    "docstring_summary",
    "parameter_descriptions",
]


# --------------------------------------------------------------------------- docstrings


_SECTION_NAMES = (
    r"args|arguments|parameters|params|keyword args|keyword arguments|other parameters|"
    r"returns?|return value|yields?|raises?|exceptions?|warns|examples?|example usage|usage|"
    r"notes?|attributes|methods|see also|references|warnings?|todo|doctests?|receives"
)
# A section header is a line of its own: Google style "Args:" (also "Examples::",
# "**Returns:**") or a Markdown heading "## Examples"; NumPy style is a section name
# underlined with dashes (checked in _is_section_start).
_SECTION = re.compile(
    rf"^(?:(?:\*\*|__)?(?:{_SECTION_NAMES})\s*(?:\*\*|__)?\s*::?\s*(?:\*\*|__)?"
    rf"|#+\s*(?:{_SECTION_NAMES})\s*:?)\s*$",
    re.IGNORECASE,
)
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_SECTION = re.compile(rf"^(?:{_SECTION_NAMES})$", re.IGNORECASE)
# reST field lists (":param x:", ":returns:"), epydoc ("@param"), directives (".. code-block::").
_REST_FIELD = re.compile(r"^(?::[A-Za-z][\w ]*:|@[A-Za-z]+\b|\.\.\s+[\w-]+::)")
_DOCTEST_PROMPT = re.compile(r"(?:^|\s)>>>(?:\s|$)")
_FENCE = re.compile(r"^(`{3,}|~{3,})")


def _is_section_start(lines: Sequence[str], index: int) -> bool:
    text = lines[index].strip()
    following = lines[index + 1] if index + 1 < len(lines) else ""
    if _NUMPY_SECTION.match(text) and _NUMPY_UNDERLINE.match(following):
        return True
    return bool(_SECTION.match(text) or _REST_FIELD.match(text))


_INTRODUCTION = re.compile(
    r"[\s,;]*\b(?:for example|for instance|e\.g\.|examples?|like this|usage)\s*:+$", re.IGNORECASE
)


def _drop_doctests(lines: list[str]) -> list[str]:
    """Remove doctest blocks (a ``>>>`` line, its ``...`` lines and output up to a blank line).

    A fenced code block holding a doctest goes as a whole, and so does a one-line
    paragraph ending in ``:`` that only introduced a removed example ("For example:").
    """
    out: list[str] = []
    index = 0
    while index < len(lines):
        text = lines[index].strip()
        fence = _FENCE.match(text)
        if fence:
            end = index + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            block = lines[index : end + 1]
            if any(_DOCTEST_PROMPT.search(line) for line in block):
                _drop_introduction(out)
            else:
                out.extend(block)
            index = end + 1
            continue
        prompt = _DOCTEST_PROMPT.search(lines[index])
        if prompt is None:
            out.append(lines[index])
            index += 1
            continue
        # "The x, e.g. >>> f(1)" (a description already joined on one line): keep the words.
        before = _INTRODUCTION.sub("", lines[index][: prompt.start()].rstrip()).rstrip(" :")
        if before:
            out.append(before)
        else:
            _drop_introduction(out)
        index += 1
        while index < len(lines) and lines[index].strip():  # continuation and output
            index += 1
    return out


def _drop_introduction(out: list[str]) -> None:
    """Drop the words that introduced a removed example ("For example:", "The x, e.g.:").

    Only from the kept text's last line: a words-only introduction ("For example:") goes
    with its line, and so does a one-line paragraph still ending in ``:``
    ("Call it like this:").
    """
    while out and not out[-1].strip():
        out.pop()
    if not out or not out[-1].rstrip().endswith(":"):
        return
    rest = _INTRODUCTION.sub("", out[-1].rstrip()).rstrip()
    alone = len(out) == 1 or not out[-2].strip()
    if not rest.strip() or (rest.endswith(":") and alone):
        out.pop()
    else:
        out[-1] = rest.rstrip(":")


def clean_description(text: str | None) -> str:
    """Return a description fit for a model: prose only, no examples or docstring sections.

    Everything from the first section on is dropped: Google (``Args:``, ``Returns:``,
    ``Example:``, ...), NumPy (a section name underlined with dashes) and reST
    (``:param x:``, ``.. code-block::``); doctest examples (``>>>`` lines and their
    output) are removed from the prose before it, which keeps its paragraphs.
    Returns ``""`` when nothing is left.

    Examples:
        >>> clean_description("Add two numbers.\\n\\nArgs:\\n    a: The first.")
        'Add two numbers.'
    """
    if not text or not text.strip():
        return ""
    lines = inspect.cleandoc(text).splitlines()
    end = next((i for i in range(len(lines)) if _is_section_start(lines, i)), len(lines))
    kept: list[str] = []
    for line in _drop_doctests(lines[:end]):
        if line.strip() or (kept and kept[-1].strip()):  # no runs of blank lines
            kept.append(line.rstrip())
    return "\n".join(kept).strip()


def docstring_summary(doc: str | None) -> str | None:
    """Return the first paragraph of a docstring as one line, or None when there is none.

    The paragraph ends at a blank line or at the first section header (Google
    ``Args:``, NumPy ``Parameters`` + dashes, Sphinx ``:param``); doctest examples
    are left out.

    Examples:
        >>> docstring_summary("Add two\\n    numbers.\\n\\n    Args:\\n        a: x")
        'Add two numbers.'
    """
    cleaned = clean_description(doc)
    if not cleaned:
        return None
    paragraph = cleaned.split("\n\n", 1)[0]
    return " ".join(paragraph.split()) or None


def parameter_descriptions(doc: str | None) -> dict[str, str]:
    """Return ``{parameter name: description}`` from a Google, NumPy or Sphinx docstring.

    Unparseable docstrings give ``{}``; whitespace inside a description is collapsed.

    Examples:
        >>> parameter_descriptions(":param x: The x.\\n:param y: The y.")
        {'x': 'The x.', 'y': 'The y.'}
    """
    if not doc or not doc.strip():
        return {}
    try:
        parsed = docstring_parser.parse(doc)
    except Exception:  # any parser failure just means "no descriptions"
        return {}
    out: dict[str, str] = {}
    for param in parsed.params:
        if param.args and param.args[0] == "attribute":
            continue
        description = " ".join(clean_description(param.description).split())
        if not description:
            continue
        for name in param.arg_name.split(","):
            cleaned = name.strip().lstrip("*")
            if cleaned:
                out.setdefault(cleaned, description)
    return out


# JSON-schema keywords whose value maps names to subschemas, holds a list of
# subschemas, or is one subschema. Only these are walked, so a property *named*
# "description" (ask_user's Option has one) is never taken for a description.
_NAMED_SUBSCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTED_SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SINGLE_SUBSCHEMAS = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)


def clean_schema_descriptions(schema: Any) -> Any:
    """Return a copy of a JSON schema whose every ``description`` went through
    :func:`clean_description`: the tool's properties, nested objects and ``$defs``
    (where pydantic puts a model's whole docstring). Emptied descriptions are left out.

    Examples:
        >>> clean_schema_descriptions({"description": "A point.\\n\\nExample:\\n    >>> P()",
        ...     "properties": {"description": {"type": "string"}}})
        {'description': 'A point.', 'properties': {'description': {'type': 'string'}}}
    """
    if isinstance(schema, list):  # "items" as a list (draft 4-7 tuples)
        return [clean_schema_descriptions(s) for s in schema]
    if not isinstance(schema, Mapping):
        return copy.deepcopy(schema)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            cleaned = clean_description(value)
            if cleaned:
                out[key] = cleaned
        elif key in _NAMED_SUBSCHEMAS and isinstance(value, Mapping):
            out[key] = {name: clean_schema_descriptions(sub) for name, sub in value.items()}
        elif key in _LISTED_SUBSCHEMAS or key in _SINGLE_SUBSCHEMAS:
            out[key] = clean_schema_descriptions(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def describe_schema(schema: Any, defs: Mapping[str, Any] | None = None) -> str:
    """Return a short human (and model) readable name for the type a JSON schema allows.

    Examples:
        >>> describe_schema({"type": "array", "items": {"type": "integer"}})
        'array of integer'
    """
    if not isinstance(schema, Mapping):
        return "any value"
    if "$ref" in schema:
        return f"object {str(schema['$ref']).rsplit('/', 1)[-1]}"
    if "enum" in schema:
        values = ", ".join(json.dumps(v) for v in list(schema["enum"])[:8])
        return f"one of {values}"
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(schema[key], list):
            return " or ".join(describe_schema(s, defs) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(describe_schema({**schema, "type": k}, defs) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"array of {describe_schema(items, defs)}" if items else "array"
    if kind == "string" and "format" in schema:
        return f"string ({schema['format']})"
    if isinstance(kind, str):
        return kind
    return "any value"
