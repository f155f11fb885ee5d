"""What the model reads about tools: prose descriptions, never doctests or docstring sections.

Every check looks at the tools exactly as a request sends them
(``model.requests[i]["tools"]``), so it covers the tool description, each
property's description and the ``$defs`` descriptions pydantic takes from model
docstrings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from deputy_shiny import Agent, Tool, tool
from deputy_shiny.testing import ScriptedModel
from deputy_shiny.tools import tools_all
from deputy_shiny.tools._function_schema import clean_description, clean_schema_descriptions

# What must never reach the model: doctest prompts and the headers of docstring sections
# (Google, NumPy and reST styles).
FORBIDDEN = re.compile(
    r">>>|^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?)\s*::?\s*$"
    r"|\b(Example|Examples|Args|Arguments|Returns|Raises):\s*$|^\s*-{3,}\s*$|:param\b|:returns?:"
    r"|:rtype:|\.\. code-block::",
    re.MULTILINE,
)


def descriptions(schema: Any) -> list[str]:
    """Every ``description`` string in a tool's JSON (keywords only, not property names)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                found.append(value)
            elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                for sub in value.values():
                    found.extend(descriptions(sub))
            else:
                found.extend(descriptions(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(descriptions(item))
    return found


def sent_tools(tools: list[Tool], tmp_path: Path) -> list[dict[str, Any]]:
    """The tools as the model receives them in a request."""
    model = ScriptedModel(["Done."])
    agent = Agent(model, tools=tools, working_dir=tmp_path)
    assert agent.chat("Hello") == "Done."
    sent: list[dict[str, Any]] = model.requests[0]["tools"]
    return sent


def by_name(sent: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in sent}


def assert_clean(function: dict[str, Any]) -> None:
    texts = descriptions(function)
    assert texts, f"{function['name']} has no descriptions at all"
    for text in texts:
        assert not FORBIDDEN.search(text), f"{function['name']}: {text!r}"
        assert text == text.strip() and text


# --------------------------------------------------------------------------- built-ins


def test_no_built_in_tool_sends_examples_or_docstring_sections(tmp_path: Path) -> None:
    built_ins = tools_all()
    sent = by_name(sent_tools(built_ins, tmp_path))
    assert set(sent) == {t.name for t in built_ins}
    for function in sent.values():
        assert_clean(function)
        assert function["description"]  # the meaningful summary stays


def test_ask_user_keeps_the_meaning_of_its_question_models(tmp_path: Path) -> None:
    sent = by_name(sent_tools(tools_all(), tmp_path))
    ask = sent["ask_user"]["parameters"]
    assert ask["$defs"]["Question"]["description"].startswith("One multiple-choice question")
    assert ask["$defs"]["Option"]["description"] == "One choice of a question."
    # Option's property named "description" is a property, not a description to clean.
    option_props = ask["$defs"]["Option"]["properties"]
    assert option_props["description"] == {
        "description": "What choosing it means.",
        "type": "string",
    }
    edits = sent["multi_edit"]["parameters"]["$defs"]["FileEdit"]
    assert edits["description"] == "One exact-text replacement for ``multi_edit``."


# --------------------------------------------------------------------------- custom tools


class Point(BaseModel):
    """A point on the map.

    Example:
        >>> Point(x=1, y=2).x
        1
    """

    x: int = Field(description="Distance east. For example:\n\n>>> Point(x=3).x\n3")
    y: int = Field(default=0, description="Distance north.")


def place_google(point: Point, label: str, scale: float = 1.0) -> str:
    """Place a labelled point on the map.

    The label is drawn next to the point.

    >>> place_google(Point(x=1, y=2), "home")
    'home at (1, 2)'

    Args:
        point: Where to put it.
        label: The text drawn next to it.
        scale: How far to zoom in.

    Returns:
        A confirmation.

    Example:
        >>> place_google(Point(x=0, y=0), "origin")
        'origin at (0, 0)'
    """
    return f"{label} at ({point.x}, {point.y})"


def place_numpy(point: Point, label: str, scale: float = 1.0) -> str:
    """Place a labelled point on the map.

    The label is drawn next to the point.

    Parameters
    ----------
    point : Point
        Where to put it.
    label : str
        The text drawn next to it.
    scale : float
        How far to zoom in.

    Returns
    -------
    str
        A confirmation.

    Examples
    --------
    >>> place_numpy(Point(x=1, y=2), "home")
    'home at (1, 2)'
    """
    return f"{label} at ({point.x}, {point.y})"


def place_rest(point: Point, label: str, scale: float = 1.0) -> str:
    """Place a labelled point on the map.

    The label is drawn next to the point.

    :param point: Where to put it.
    :param label: The text drawn next to it.
    :param scale: How far to zoom in.
    :returns: A confirmation.

    .. code-block:: python

        >>> place_rest(Point(x=1, y=2), "home")
        'home at (1, 2)'
    """
    return f"{label} at ({point.x}, {point.y})"


@pytest.mark.parametrize("fn", [place_google, place_numpy, place_rest], ids=lambda f: f.__name__)
def test_a_custom_tool_sends_prose_only(fn: Any, tmp_path: Path) -> None:
    function = by_name(sent_tools([tool(fn)], tmp_path))[fn.__name__]
    assert_clean(function)
    assert function["description"] == "Place a labelled point on the map."
    props = function["parameters"]["properties"]
    assert props["point"]["description"] == "Where to put it."
    assert props["label"]["description"] == "The text drawn next to it."
    assert props["scale"]["description"] == "How far to zoom in."
    point = function["parameters"]["$defs"]["Point"]
    assert point["description"] == "A point on the map."
    assert point["properties"]["x"]["description"] == "Distance east."
    assert point["properties"]["y"]["description"] == "Distance north."
    assert "A confirmation" not in json.dumps(function)


def test_explicit_descriptions_and_dict_schemas_are_cleaned_too(tmp_path: Path) -> None:
    def shout(word: str) -> str:
        return word.upper()

    explicit = tool(
        shout,
        description="Shout a word.\n\nUse it sparingly.\n\nExample:\n    >>> shout('hi')\n    'HI'",
        arguments={
            "type": "object",
            "properties": {
                "word": {
                    "type": "string",
                    "description": "The word, e.g.:\n\n>>> 'hi'\n'hi'\n\nArgs:\n    none",
                }
            },
            "required": ["word"],
        },
    )
    function = by_name(sent_tools([explicit], tmp_path))["shout"]
    assert_clean(function)
    assert function["description"] == "Shout a word.\n\nUse it sparingly."
    assert function["parameters"]["properties"]["word"]["description"] == "The word"
    assert explicit.parse_arguments('{"word": "hi"}') == {"word": "hi"}


def test_a_description_that_is_only_an_example_falls_back_to_the_docstring() -> None:
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    assert tool(double, description=">>> double(2)\n4").description == "Double a number."


# --------------------------------------------------------------------------- the cleaner


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Add two numbers.\n\nArgs:\n    a: The first.", "Add two numbers."),
        ("Add.\n\nArguments:\n    a: x", "Add."),
        ("Add.\n\nKeyword Args:\n    a: x", "Add."),
        ("Add.\nParameters\n----------\na : int", "Add."),
        (
            "Add.\n\nDetails\n-------\nMore.\n\nSee Also\n--------\nsub",
            "Add.\n\nDetails\n-------\nMore.",
        ),
        ("Add.\n\nReturns:\n    int", "Add."),
        ("Add.\n\nExamples::\n\n    add(1, 2)", "Add."),
        ("Add.\n\n**Example:**\n\nadd(1, 2)", "Add."),
        ("Add.\n\n## Examples\n\nadd(1, 2)", "Add."),
        ("Add.\n:param a: x\n:returns: y", "Add."),
        ("Add.\n\n.. code-block:: python\n\n    add(1, 2)", "Add."),
        ("Add.\n\nFor example:\n\n>>> add(1, 2)\n3\n\nThen more.", "Add.\n\nThen more."),
        ("Add.\n\n```python\n>>> add(1, 2)\n3\n```\n\nThen more.", "Add.\n\nThen more."),
        ("Add, for example: >>> add(1, 2) 3", "Add"),
        ("Add.\n\n```python\nadd(1, 2)\n```", "Add.\n\n```python\nadd(1, 2)\n```"),
        ("Returns the sum.\nArguments are added left to right.", None),
        ("Notes are kept: when the prose says so.", None),
        (">>> add(1, 2)\n3", ""),
        ("", ""),
    ],
)
def test_clean_description(text: str, expected: str | None) -> None:
    assert clean_description(text) == (text if expected is None else expected)


def test_clean_schema_descriptions_walks_keywords_not_property_names() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "Kept.\n\nExample:\n    >>> x"},
            "items": {"type": "array", "items": {"description": ">>> only an example"}},
            "either": {"anyOf": [{"type": "string", "description": "S.\n\nArgs:\n  x: y"}]},
        },
        "$defs": {"M": {"type": "object", "description": "M.\n\n>>> M()\nM()"}},
    }
    cleaned = clean_schema_descriptions(schema)
    assert cleaned["properties"]["description"] == {"type": "string", "description": "Kept."}
    assert cleaned["properties"]["items"]["items"] == {}
    assert cleaned["properties"]["either"]["anyOf"][0]["description"] == "S."
    assert cleaned["$defs"]["M"]["description"] == "M."
    assert schema["$defs"]["M"]["description"] == "M.\n\n>>> M()\nM()"  # input untouched
