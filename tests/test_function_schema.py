"""Specification of deputy_shiny.tools._function_schema: signature -> JSON schema -> validated call.

This module uses ``from __future__ import annotations`` on purpose: every function
below has string annotations that the schema builder must resolve.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel, ConfigDict, Field

from deputy_shiny.errors import DeputyError, InvalidToolError, ToolArgumentsError
from deputy_shiny.tools._function_schema import (
    arguments_schema,
    describe_schema,
    docstring_summary,
    parameter_descriptions,
)

# --------------------------------------------------------------------------- fixtures


class Point(BaseModel):
    """A point."""

    x: int
    y: int = 0


class Color(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Box:
    width: float
    height: float


class Cat(BaseModel):
    kind: Literal["cat"]
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: int


_SENTINEL = object()


def schema_of(fn: Callable[..., Any], **kw: Any) -> dict[str, Any]:
    return arguments_schema(fn, tool_name="t", **kw).json_schema


def call(fn: Callable[..., Any], raw: Any, **kw: Any) -> Any:
    s = arguments_schema(fn, tool_name="t", **kw)
    args, kwargs = s.bind(s.validate(raw, tool_name="t"))
    return fn(*args, **kwargs)


def arguments_error(fn: Callable[..., Any], raw: Any, **kw: Any) -> str:
    s = arguments_schema(fn, tool_name="t", **kw)
    with pytest.raises(ToolArgumentsError) as info:
        s.validate(raw, tool_name="t")
    assert info.value.tool_name == "t"
    return str(info.value)


# --------------------------------------------------------------------------- docstrings


def test_summary_is_first_paragraph_joined_on_one_line() -> None:
    doc = """Add two
    numbers together.

    More detail that is not the summary.
    """
    assert docstring_summary(doc) == "Add two numbers together."


@pytest.mark.parametrize(
    "doc",
    [
        "Add numbers.\nArgs:\n    a: x",
        "Add numbers.\nParameters\n----------\na : int",
        "Add numbers.\n:param a: x",
    ],
)
def test_summary_stops_at_a_section_without_blank_line(doc: str) -> None:
    assert docstring_summary(doc) == "Add numbers."


@pytest.mark.parametrize("doc", [None, "", "   \n  ", "Args:\n    a: x"])
def test_summary_none_without_text(doc: str | None) -> None:
    assert docstring_summary(doc) is None


GOOGLE = """Do it.

Args:
    a: The first
        number.
    b (int): The second.

Attributes:
    z: Not a parameter.
"""

NUMPY = """Do it.

Parameters
----------
a : int
    The first
    number.
b : int
    The second.
"""

SPHINX = """Do it.

:param a: The first
    number.
:param int b: The second.
:returns: Nothing.
"""


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_parameter_descriptions_in_three_styles(doc: str) -> None:
    assert parameter_descriptions(doc) == {"a": "The first number.", "b": "The second."}


def test_parameter_descriptions_of_nothing() -> None:
    assert parameter_descriptions(None) == {}
    assert parameter_descriptions("Just a summary.") == {}


# --------------------------------------------------------------------------- signature schemas


def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def test_signature_schema_shape() -> None:
    assert schema_of(add) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "description": "The second number.", "default": 1},
        },
        "required": ["a"],
        "additionalProperties": False,
    }


def test_no_parameters_gives_empty_object_schema() -> None:
    def ping() -> str:
        return "pong"

    assert schema_of(ping) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert call(ping, None) == "pong"
    assert call(ping, "") == "pong"
    assert call(ping, "null") == "pong"
    assert call(ping, "{}") == "pong"


def test_annotated_field_description_wins_over_docstring() -> None:
    def f(n: Annotated[int, Field(description="From Field.", ge=0)], m: int) -> None:
        """F.

        Args:
            n: From docstring.
            m: Only docstring.
        """

    props = schema_of(f)["properties"]
    assert props["n"] == {"type": "integer", "description": "From Field.", "minimum": 0}
    assert props["m"]["description"] == "Only docstring."


def test_rich_types_make_valid_json_schema_with_refs() -> None:
    def f(
        p: Point,
        tags: list[str],
        color: Color,
        mode: Literal["fast", "slow"] = "fast",
        box: Box | None = None,
        extra: dict[str, int] | None = None,
    ) -> None:
        """F."""

    schema = schema_of(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert "title" not in schema
    assert all("title" not in prop for prop in schema["properties"].values())
    # The schema really accepts a good call and rejects a bad one.
    good = {"p": {"x": 1}, "tags": ["a"], "color": "red", "box": {"width": 1, "height": 2}}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "p": {"x": "no"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "surprise": 1}, schema)


def test_validation_coerces_to_python_values() -> None:
    def f(p: Point, color: Color, box: Box, n: int) -> tuple[Any, ...]:
        """F."""
        return p, color, box, n

    p, color, box, n = call(
        f, '{"p": {"x": 2}, "color": "blue", "box": {"width": 1, "height": 2.5}, "n": "7"}'
    )
    assert p == Point(x=2, y=0)
    assert color is Color.BLUE
    assert box == Box(width=1.0, height=2.5)
    assert n == 7


def test_a_dict_is_accepted_as_well_as_json_text() -> None:
    assert call(add, {"a": 2, "b": 3}) == 5


def test_only_given_arguments_are_passed_so_the_function_keeps_its_defaults() -> None:
    seen: list[Any] = []

    def f(a: int, marker: Any = _SENTINEL, items: list[int] | None = None) -> None:
        """F."""
        seen.append((marker, items))

    s = arguments_schema(f, tool_name="t")
    assert s.validate('{"a": 1}', tool_name="t") == {"a": 1}
    call(f, '{"a": 1}')
    assert seen[-1][0] is _SENTINEL  # identity kept, not a copy
    assert "default" not in s.json_schema["properties"]["marker"]  # not JSON: left out


def test_null_for_a_parameter_defaulting_to_none_means_the_default() -> None:
    def f(a: int, limit: int = None) -> Any:  # type: ignore[assignment]  # noqa: RUF013
        """F."""
        return limit

    assert call(f, '{"a": 1, "limit": null}') is None
    assert call(f, '{"a": 1, "limit": 5}') == 5


def test_field_default_in_signature_is_resolved() -> None:
    def f(a: int = Field(3, description="A number.")) -> int:
        """F."""
        return a

    assert schema_of(f)["properties"]["a"] == {
        "type": "integer",
        "description": "A number.",
        "default": 3,
    }
    assert call(f, "{}") == 3


def test_positional_only_and_keyword_only_parameters_bind_correctly() -> None:
    def f(a: int, /, b: int = 2, *, c: int = 3) -> tuple[int, int, int]:
        """F."""
        return a, b, c

    assert call(f, '{"a": 1, "c": 9}') == (1, 2, 9)
    s = arguments_schema(f, tool_name="t")
    assert s.bind({"a": 1, "b": 5}) == ([1], {"b": 5})


def test_positional_only_gap_is_filled_from_the_signature_default() -> None:
    def f(a: int = 1, b: int = 2, /) -> tuple[int, int]:
        """F."""
        return a, b

    assert call(f, '{"b": 7}') == (1, 7)


def test_parameter_names_that_clash_with_pydantic_attributes() -> None:
    def f(json: str, copy: int, model_config: bool, _private: str = "p") -> tuple[Any, ...]:
        """F."""
        return json, copy, model_config, _private

    assert set(schema_of(f)["properties"]) == {"json", "copy", "model_config", "_private"}
    assert call(f, '{"json": "j", "copy": 1, "model_config": true, "_private": "q"}') == (
        "j",
        1,
        True,
        "q",
    )


def test_bound_methods_skip_self_and_partials_skip_bound_arguments() -> None:
    class Counter:
        def __init__(self) -> None:
            self.total = 0

        def bump(self, by: int) -> int:
            """Bump."""
            self.total += by
            return self.total

    counter = Counter()
    assert list(schema_of(counter.bump)["properties"]) == ["by"]
    assert call(counter.bump, '{"by": 2}') == 2

    partial = functools.partial(add, 10)
    assert list(schema_of(partial)["properties"]) == ["b"]
    assert schema_of(partial)["properties"]["b"]["description"] == "The second number."
    assert call(partial, '{"b": 5}') == 15


def test_unresolvable_return_annotation_does_not_matter() -> None:
    def f(a: int) -> NotDefinedAnywhere:  # type: ignore[name-defined]  # noqa: F821
        """F."""
        return a

    assert call(f, '{"a": 4}') == 4


# --------------------------------------------------------------------------- signature errors


def test_var_positional_is_rejected_naming_it() -> None:
    def f(*items: int) -> None:
        """F."""

    with pytest.raises(InvalidToolError, match=r"\*items"):
        arguments_schema(f, tool_name="t")


def test_var_keyword_is_rejected_naming_it() -> None:
    def f(a: int, **options: int) -> None:
        """F."""

    with pytest.raises(InvalidToolError, match=r"\*\*options"):
        arguments_schema(f, tool_name="t")


def test_missing_type_hint_is_rejected_naming_the_parameter() -> None:
    def f(a: int, b) -> None:  # type: ignore[no-untyped-def]
        """F."""

    with pytest.raises(InvalidToolError, match=r"parameter 'b'.*no type hint"):
        arguments_schema(f, tool_name="t")


@pytest.mark.parametrize("hint", [socket.socket, Callable[[int], int]])
def test_types_without_json_schema_are_rejected_naming_the_parameter(hint: Any) -> None:
    def f(ok: int, bad: Any) -> None:
        """F."""

    f.__annotations__["bad"] = hint
    with pytest.raises(InvalidToolError, match="parameter 'bad'"):
        arguments_schema(f, tool_name="t")


def test_unresolvable_type_hint_is_rejected_naming_the_parameter() -> None:
    def f(ok: int, later: Undefined) -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(InvalidToolError, match=r"parameter 'later'.*Undefined"):
        arguments_schema(f, tool_name="t")


def test_unreadable_signature_without_arguments_is_rejected() -> None:
    # Some builtins have no signature at all.
    with pytest.raises(InvalidToolError, match="cannot read the signature of min"):
        arguments_schema(min, tool_name="t")


def test_invalid_tool_error_is_a_deputy_error() -> None:
    assert issubclass(InvalidToolError, DeputyError)
    assert issubclass(ToolArgumentsError, DeputyError)


# --------------------------------------------------------------------------- argument errors


def test_malformed_json_quotes_an_excerpt_and_shows_the_expected_shape() -> None:
    message = arguments_error(add, '{"a": 1 "b": 2}')
    assert "not valid JSON" in message
    assert '\'{"a": 1 "b": 2}\'' in message
    assert '{"a": <integer>, "b": <integer>}' in message


def test_malformed_json_excerpt_of_long_text_is_short() -> None:
    raw = '{"a": ' + "1" * 500 + ", oops}"
    message = arguments_error(add, raw)
    assert "oops" in message
    assert len(message) < 400


@pytest.mark.parametrize(
    ("raw", "what"),
    [("[1, 2]", "an array"), ('"hello"', "a string"), ("3", "a number"), ([1], "an array")],
)
def test_arguments_that_are_not_an_object(raw: Any, what: str) -> None:
    message = arguments_error(add, raw)
    assert "must be a JSON object" in message
    assert what in message


def test_missing_required_argument_names_it_and_its_type() -> None:
    message = arguments_error(add, '{"b": 2}')
    assert "'a': missing required argument (expected integer)" in message
    assert arguments_error(add, "") == arguments_error(add, None)


def test_unknown_argument_lists_the_real_ones() -> None:
    message = arguments_error(add, '{"a": 1, "c": 2}')
    assert "'c': unknown argument; the arguments are 'a', 'b'" in message


def test_wrong_type_names_the_field_value_and_expected_type() -> None:
    message = arguments_error(add, '{"a": "abc"}')
    assert "'a':" in message
    assert "valid integer" in message
    assert 'got "abc"' in message
    assert "expected integer" in message
    assert message.endswith("Fix the arguments and call the tool again.")


def test_nested_errors_give_a_path() -> None:
    def f(points: list[Point]) -> None:
        """F."""

    message = arguments_error(f, '{"points": [{"x": 1}, {"x": "no"}]}')
    assert "'points[1].x':" in message


def test_several_problems_are_listed_together() -> None:
    message = arguments_error(add, '{"b": "x", "zzz": 1}')
    assert message.count("\n- ") == 3


def test_union_errors_are_grouped_under_the_value() -> None:
    def f(x: int | list[int], pet: Cat | Dog | None = None) -> None:
        """F."""

    message = arguments_error(f, '{"x": "abc", "pet": {"kind": "dog"}}')
    assert "'x': matches none of the allowed types (as int:" in message
    assert "as list[int]:" in message
    assert "'pet': matches none of the allowed types" in message
    assert "as Dog: 'bark': Field required" in message


def test_optional_model_errors_keep_their_plain_path() -> None:
    def f(p: Point | None = None, pts: dict[str, Point] | None = None) -> None:
        """F."""

    message = arguments_error(f, '{"p": {"x": "a"}, "pts": {"k": {"x": "b"}}}')
    assert "'p.x':" in message
    assert "'pts.k.x':" in message
    assert "allowed types" not in message


def test_many_problems_are_capped() -> None:
    def f(items: list[int]) -> None:
        """F."""

    message = arguments_error(f, {"items": ["x"] * 30})
    assert "... and 20 more problems" in message


# --------------------------------------------------------------------------- arguments=Model


class AddArgs(BaseModel):
    a: int = Field(description="First.")
    b: int = 10


def test_model_arguments_schema_and_call_with_all_fields() -> None:
    def f(a: int, b: int) -> int:
        return a * b

    schema = schema_of(f, arguments=AddArgs)
    assert schema["properties"]["a"] == {"type": "integer", "description": "First."}
    assert schema["required"] == ["a"]
    assert schema["additionalProperties"] is False
    assert call(f, '{"a": 3}', arguments=AddArgs) == 30  # the model's default is passed
    message = arguments_error(f, '{"a": 1, "c": 1}', arguments=AddArgs)
    assert "'c': unknown argument" in message


class AliasedArgs(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: str = Field(alias="from")


def test_model_aliases_are_what_the_model_sends() -> None:
    def f(from_: str) -> str:
        return from_

    assert list(schema_of(f, arguments=AliasedArgs)["properties"]) == ["from"]
    assert call(f, '{"from": "x"}', arguments=AliasedArgs) == "x"


class OpenArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


def test_model_that_allows_extra_passes_extras_as_keywords() -> None:
    def f(a: int, **rest: Any) -> dict[str, Any]:
        return {"a": a, **rest}

    assert schema_of(f, arguments=OpenArgs).get("additionalProperties") is not False
    assert call(f, '{"a": 1, "z": 2}', arguments=OpenArgs) == {"a": 1, "z": 2}


def test_model_fields_must_match_the_function() -> None:
    def f(x: int) -> None:
        pass

    with pytest.raises(InvalidToolError, match="'a', 'b' that match no parameter"):
        arguments_schema(f, tool_name="t", arguments=AddArgs)


# --------------------------------------------------------------------------- arguments=dict


UPPER_SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}


def test_dict_schema_is_tidied_and_closed() -> None:
    schema = schema_of(str.upper, arguments=UPPER_SCHEMA)
    assert schema == {
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert UPPER_SCHEMA == {  # the caller's dict is not modified
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "required": ["x"],
    }


def test_dict_schema_binds_positionally_for_positional_only_functions() -> None:
    assert call(str.upper, '{"x": "hi"}', arguments=UPPER_SCHEMA) == "HI"


def test_dict_schema_binds_positionally_when_there_is_no_signature() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    assert call(min, '{"a": 3, "b": 2}', arguments=schema) == 2


def test_dict_schema_binds_by_keyword_when_names_match() -> None:
    def f(b: int, a: int = 0) -> tuple[int, int]:
        return a, b

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert call(f, '{"a": 1, "b": 2}', arguments=schema) == (1, 2)


def test_dict_schema_positional_gaps_use_schema_defaults() -> None:
    def f(a: int, b: int, c: int = 30, /) -> tuple[int, int, int]:
        return a, b, c

    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "default": 20},
            "z": {"type": "integer"},
        },
        "required": ["x"],
    }
    assert call(f, '{"x": 1, "z": 3}', arguments=schema) == (1, 20, 3)
    assert call(f, '{"x": 1, "y": 2}', arguments=schema) == (1, 2, 30)


def test_dict_schema_validation_errors_are_readable() -> None:
    message = arguments_error(str.upper, '{"x": 1, "y": 2}', arguments=UPPER_SCHEMA)
    assert "'y': unknown argument; the arguments are 'x'" in message
    assert "'x': 1 is not of type 'string'; expected string" in message
    message = arguments_error(str.upper, "{}", arguments=UPPER_SCHEMA)
    assert "'x': missing required argument (expected string)" in message


def test_dict_schema_nested_errors_have_paths() -> None:
    def f(items: Any) -> None:
        pass

    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "integer"}}},
            }
        },
    }
    message = arguments_error(f, '{"items": [{"n": 1}, {"n": "two"}]}', arguments=schema)
    assert "'items[1].n': 'two' is not of type 'integer'" in message


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "string"}, "must be a JSON schema for an object"),
        ({"type": "object", "properties": {"x": {"type": "strng"}}}, "not a valid JSON schema"),
        ({"type": "object", "properties": {"x": {}}, "required": ["y"]}, "'y'"),
        ({"type": "object", "properties": []}, "'properties' must be an object"),
    ],
)
def test_bad_dict_schemas_are_rejected(schema: dict[str, Any], match: str) -> None:
    def f(x: Any = None) -> None:
        pass

    with pytest.raises(InvalidToolError, match=match):
        arguments_schema(f, tool_name="t", arguments=schema)


def test_dict_schema_must_cover_required_parameters() -> None:
    def f(x: str, y: str) -> None:
        pass

    with pytest.raises(InvalidToolError, match="required parameter 'y'"):
        arguments_schema(f, tool_name="t", arguments=UPPER_SCHEMA)


def test_arguments_of_another_kind_are_rejected() -> None:
    with pytest.raises(InvalidToolError, match="BaseModel subclass or a JSON schema"):
        arguments_schema(add, tool_name="t", arguments=[1, 2])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- describe_schema


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "integer"}, "integer"),
        ({"type": ["string", "null"]}, "string or null"),
        ({"type": "array", "items": {"type": "number"}}, "array of number"),
        ({"enum": ["a", "b"]}, 'one of "a", "b"'),
        ({"$ref": "#/$defs/Point"}, "object Point"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "integer or null"),
        ({"type": "string", "format": "date-time"}, "string (date-time)"),
        ({}, "any value"),
    ],
)
def test_describe_schema(schema: dict[str, Any], text: str) -> None:
    assert describe_schema(schema) == text
