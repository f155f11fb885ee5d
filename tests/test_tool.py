"""Specification of deputy_shiny.tools: tool(), Tool, annotations, metadata, output formatting."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from deputy_shiny.errors import InvalidToolError, ToolArgumentsError
from deputy_shiny.tools import (
    Tool,
    ToolAnnotations,
    ToolSource,
    effective_annotations,
    format_tool_output,
    tool,
    tool_annotations,
    tool_metadata,
)

UPPER_SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}


def make_uppercase() -> Tool:
    return tool(
        str.upper,
        name="uppercase",
        description="Uppercase text.",
        arguments=UPPER_SCHEMA,
        annotations=tool_annotations(
            read_only_hint=True,
            destructive_hint=False,
            open_world_hint=False,
            idempotent_hint=True,
        ),
    )


def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Returns their sum.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


class Point(BaseModel):
    x: int
    y: int = 0


# --------------------------------------------------------------------------- the spec example


async def test_uppercase_example_from_the_spec() -> None:
    uppercase = make_uppercase()
    assert uppercase("hello") == "HELLO"
    assert await uppercase.invoke(uppercase.parse_arguments('{"x": "hi"}')) == "HI"
    assert uppercase.name == "uppercase"
    assert uppercase.description == "Uppercase text."
    assert uppercase.source == ToolSource(type="function", module="builtins")
    assert uppercase.is_async is False


# --------------------------------------------------------------------------- defining tools


def test_name_and_description_come_from_the_function() -> None:
    t = tool(add)
    assert isinstance(t, Tool)
    assert t.name == "add"
    assert t.description == "Add two numbers."  # the first paragraph only
    assert t.parameters["properties"]["a"]["description"] == "The first number."
    assert t.source == ToolSource(type="function", module=__name__)
    assert t.fn is add
    assert t(2, 3) == 5
    assert t(a=2) == 3


def test_explicit_name_and_description_win() -> None:
    t = tool(add, name="plus", description="  Sum.  ")
    assert (t.name, t.description) == ("plus", "Sum.")


def test_decorator_forms() -> None:
    @tool
    def one() -> int:
        """Return one."""
        return 1

    @tool(name="two_", description="Return two.")
    def two() -> int:
        return 2

    assert isinstance(one, Tool)
    assert (one.name, one()) == ("one", 1)
    assert (two.name, two.description, two()) == ("two_", "Return two.", 2)


def test_tool_keeps_the_function_signature_for_inspection() -> None:
    assert list(inspect.signature(tool(add)).parameters) == ["a", "b"]
    assert tool(add).__doc__ == add.__doc__


def test_annotated_descriptions_reach_the_schema() -> None:
    def scale(n: Annotated[float, Field(description="The factor.")]) -> float:
        """Scale."""
        return n

    assert tool(scale).parameters["properties"]["n"] == {
        "type": "number",
        "description": "The factor.",
    }


def test_pydantic_model_parameters_become_instances() -> None:
    def norm(p: Point) -> int:
        """Manhattan norm."""
        return abs(p.x) + abs(p.y)

    t = tool(norm)
    args = t.parse_arguments('{"p": {"x": -2, "y": 3}}')
    assert args == {"p": Point(x=-2, y=3)}
    assert t.parameters["$defs"]["Point"]["properties"]["x"] == {"type": "integer"}


def test_arguments_model() -> None:
    class Args(BaseModel):
        text: str
        times: int = 2

    def repeat(text: str, times: int) -> str:
        return text * times

    t = tool(repeat, description="Repeat text.", arguments=Args)
    assert t.parse_arguments('{"text": "ab"}') == {"text": "ab", "times": 2}
    assert t.parameters["required"] == ["text"]


def test_callable_object_and_bound_method() -> None:
    class Greeter:
        """Greets people."""

        def __call__(self, who: str) -> str:
            return f"hi {who}"

        def shout(self, who: str) -> str:
            """Shout a greeting."""
            return f"HI {who}"

    g = Greeter()
    t = tool(g, name="greet")
    assert t.description == "Greets people."
    assert list(t.parameters["properties"]) == ["who"]
    m = tool(g.shout)
    assert (m.name, m.description, m("x")) == ("shout", "Shout a greeting.", "HI x")


def test_a_tool_can_be_rewrapped_with_a_new_name() -> None:
    t = tool(add, annotations={"read_only_hint": True})
    renamed = tool(t, name="plus")
    assert renamed.name == "plus"
    assert renamed.fn is add
    assert renamed.description == t.description
    assert renamed.annotations == t.annotations
    assert renamed.parameters == t.parameters


def test_parameters_and_openai_schema() -> None:
    t = tool(add)
    assert t.openai_schema() == {
        "type": "function",
        "function": {"name": "add", "description": "Add two numbers.", "parameters": t.parameters},
    }
    t.parameters["properties"].clear()  # a copy: the tool is unchanged
    assert "a" in t.parameters["properties"]


def test_repr_is_informative() -> None:
    text = repr(make_uppercase())
    assert "uppercase(x: string)" in text
    assert "read_only_hint=True" in text
    assert "function:builtins" in text
    async_text = repr(tool(async_double))
    assert async_text.startswith("<async Tool async_double(x: integer)")
    assert "annotations=[none]" in async_text
    assert "b?: integer" in repr(tool(add))


# --------------------------------------------------------------------------- definition errors


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("has space", "' '"),
        ("9lives", "start with a letter"),
        ("x" * 65, "65 characters"),
        ("dots.not.ok", "'.'"),
    ],
)
def test_malformed_names_are_rejected(name: str, problem: str) -> None:
    with pytest.raises(InvalidToolError, match="Invalid tool name") as info:
        tool(add, name=name)
    assert problem in str(info.value)


def test_longest_valid_name_and_dashes_are_fine() -> None:
    assert tool(add, name="a" * 64).name == "a" * 64
    assert tool(add, name="_my-tool_2").name == "_my-tool_2"


def test_lambda_needs_a_name() -> None:
    with pytest.raises(InvalidToolError, match="lambda"):
        tool(lambda: 1, description="One.")
    assert tool(lambda: 1, name="one", description="One.")() == 1


def test_partial_needs_a_name() -> None:
    with pytest.raises(InvalidToolError, match="name="):
        tool(functools.partial(add, 1))
    t = tool(functools.partial(add, 1), name="inc")
    assert t.description == "Add two numbers."
    assert list(t.parameters["properties"]) == ["b"]


def test_missing_description_is_rejected() -> None:
    def silent(x: int) -> int:
        return x

    with pytest.raises(InvalidToolError, match="describe what the tool does"):
        tool(silent)
    with pytest.raises(InvalidToolError, match="describe what the tool does"):
        tool(silent, description="   ")


def test_not_callable_is_rejected() -> None:
    with pytest.raises(InvalidToolError, match="callable"):
        tool(42)  # type: ignore[call-overload]


def test_undescribable_signatures_are_rejected_naming_the_parameter() -> None:
    def untyped(a, b: int) -> None:  # type: ignore[no-untyped-def]
        """U."""

    def star(*a: int) -> None:
        """S."""

    def double_star(**kw: int) -> None:
        """D."""

    def weird(a: int, sock: threading.Lock) -> None:
        """W."""

    with pytest.raises(InvalidToolError, match=r"'a'.*no type hint"):
        tool(untyped)
    with pytest.raises(InvalidToolError, match=r"\*a"):
        tool(star)
    with pytest.raises(InvalidToolError, match=r"\*\*kw"):
        tool(double_star)
    with pytest.raises(InvalidToolError, match="parameter 'sock'"):
        tool(weird)


def test_untyped_function_is_fine_with_arguments() -> None:
    def untyped(a, b=2):  # type: ignore[no-untyped-def]
        return a * b

    t = tool(
        untyped,
        description="Multiply.",
        arguments={"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]},
    )
    assert t.parse_arguments({"a": 3}) == {"a": 3}


def test_generators_are_rejected() -> None:
    def gen() -> Any:
        """G."""
        yield 1

    async def agen() -> Any:
        """A."""
        yield 1

    for fn in (gen, agen):
        with pytest.raises(InvalidToolError, match="generator"):
            tool(fn)


def test_source_must_be_a_tool_source() -> None:
    with pytest.raises(InvalidToolError, match="ToolSource"):
        tool(add, source={"type": "package"})  # type: ignore[call-overload]
    t = tool(add, source=ToolSource(type="package", package="deputy_shiny"))
    assert t.source.package == "deputy_shiny"


# --------------------------------------------------------------------------- parse_arguments


def test_parse_arguments_happy_paths() -> None:
    t = tool(add)
    assert t.parse_arguments('{"a": 1}') == {"a": 1}
    assert t.parse_arguments({"a": "2", "b": 3}) == {"a": 2, "b": 3}


def test_empty_arguments_for_a_tool_without_required_parameters() -> None:
    def now() -> str:
        """Now."""
        return "now"

    t = tool(now)
    for raw in ("", None, "  ", "{}", "null"):
        assert t.parse_arguments(raw) == {}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1,', "not valid JSON"),
        ('["a"]', "must be a JSON object"),
        ("", "'a': missing required argument (expected integer)"),
        ('{"a": 1, "c": 2}', "'c': unknown argument; the arguments are 'a', 'b'"),
        ('{"a": "one"}', "'a': Input should be a valid integer"),
    ],
)
def test_parse_arguments_errors_are_for_the_model(raw: str, expected: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        tool(add).parse_arguments(raw)
    message = str(info.value)
    assert "'add'" in message
    assert expected in message
    assert info.value.tool_name == "add"


def test_json_schema_arguments_errors() -> None:
    uppercase = make_uppercase()
    with pytest.raises(ToolArgumentsError, match="'x': 5 is not of type 'string'"):
        uppercase.parse_arguments('{"x": 5}')
    with pytest.raises(ToolArgumentsError, match="'x': missing required argument"):
        uppercase.parse_arguments("{}")


# --------------------------------------------------------------------------- invoke


async def async_double(x: int) -> int:
    """Double a number, asynchronously."""
    await asyncio.sleep(0)
    return 2 * x


async def test_async_tool_is_awaited() -> None:
    t = tool(async_double)
    assert t.is_async
    coro = t(3)  # calling the tool directly gives the coroutine, as the function would
    assert inspect.iscoroutine(coro)
    assert await coro == 6
    assert await t.invoke(t.parse_arguments('{"x": 4}')) == 8


async def test_async_callable_object_is_detected() -> None:
    class Doubler:
        """Double."""

        async def __call__(self, x: int) -> int:
            return 2 * x

    t = tool(Doubler(), name="doubler")
    assert t.is_async
    assert await t.invoke({"x": 5}) == 10


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    def where() -> int:
        """Which thread."""
        return threading.get_ident()

    t = tool(where)
    assert await t.invoke(t.parse_arguments("")) != threading.get_ident()


async def test_event_loop_stays_responsive_while_a_sync_tool_sleeps() -> None:
    def slow() -> str:
        """Sleep a bit."""
        time.sleep(0.2)
        return "done"

    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    result = await tool(slow).invoke({})
    elapsed = time.perf_counter() - started
    stop.set()
    await task
    assert result == "done"
    assert elapsed >= 0.2
    assert ticks >= 5  # ~20 ticks if the loop was free; 1 if it was blocked


async def test_exceptions_propagate_unchanged() -> None:
    class Boom(Exception):
        pass

    def explode() -> None:
        """Explode."""
        raise Boom("sync")

    async def aexplode() -> None:
        """Explode."""
        raise Boom("async")

    with pytest.raises(Boom, match="sync"):
        await tool(explode).invoke({})
    with pytest.raises(Boom, match="async"):
        await tool(aexplode).invoke({})


async def test_invoke_uses_function_defaults_for_omitted_arguments() -> None:
    t = tool(add)
    assert await t.invoke(t.parse_arguments('{"a": 5}')) == 6


async def test_sync_function_returning_a_coroutine_is_awaited() -> None:
    t = tool(
        lambda x: async_double(x),
        name="wrapped",
        description="Wrapped.",
        arguments={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    )
    assert not t.is_async
    assert await t.invoke({"x": 2}) == 4


# --------------------------------------------------------------------------- annotations


def test_tool_annotations_keep_missing_hints_as_none() -> None:
    a = tool_annotations(read_only_hint=True)
    assert a == ToolAnnotations(read_only_hint=True)
    assert a.destructive_hint is None
    assert tool(add, annotations=a).annotations is a
    assert tool(add).annotations == ToolAnnotations()


def test_annotations_are_frozen() -> None:
    a = tool_annotations(read_only_hint=True)
    with pytest.raises(ValidationError):
        a.read_only_hint = False  # type: ignore[misc]


def test_annotations_from_a_dict() -> None:
    t = tool(add, annotations={"read_only_hint": True, "title": "Adder"})
    assert t.annotations == ToolAnnotations(read_only_hint=True, title="Adder")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"read_only": True}, "unknown annotation 'read_only'"),
        ({"readOnlyHint": True}, "did you mean 'read_only_hint'"),
        ({"destructive_hint": "no"}, "'destructive_hint' must be True, False or None"),
        ({"idempotent_hint": 1}, "'idempotent_hint' must be True, False or None"),
        ({"title": 3}, "'title' must be a string"),
        (["read_only_hint"], "must be a ToolAnnotations"),
    ],
)
def test_malformed_annotations_name_the_key(value: Any, match: str) -> None:
    with pytest.raises(InvalidToolError, match=match):
        tool(add, annotations=value)


def test_tool_annotations_rejects_non_bool() -> None:
    with pytest.raises(InvalidToolError, match="'open_world_hint'"):
        tool_annotations(open_world_hint="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- metadata


def test_metadata_of_a_fully_annotated_tool() -> None:
    assert tool_metadata(make_uppercase()) == {
        "name": "uppercase",
        "source": {"type": "function", "module": "builtins"},
        "annotations": {
            "read_only_hint": True,
            "destructive_hint": False,
            "open_world_hint": False,
            "idempotent_hint": True,
        },
        "missing_annotations": [],
        "effective_annotations": {
            "read_only_hint": True,
            "destructive_hint": False,
            "open_world_hint": False,
            "idempotent_hint": True,
        },
    }


def test_metadata_of_an_unannotated_tool_is_cautious() -> None:
    meta = tool_metadata(tool(add))
    assert meta["source"] == {"type": "function", "module": __name__}
    assert meta["annotations"] == {}
    assert meta["missing_annotations"] == [
        "read_only_hint",
        "destructive_hint",
        "open_world_hint",
        "idempotent_hint",
    ]
    assert meta["effective_annotations"] == {
        "read_only_hint": False,
        "destructive_hint": True,
        "open_world_hint": True,
        "idempotent_hint": False,
    }


def test_metadata_of_a_partially_annotated_tool() -> None:
    meta = tool_metadata(
        tool(add, annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
    )
    assert meta["annotations"] == {"read_only_hint": True, "open_world_hint": False}
    assert meta["missing_annotations"] == ["destructive_hint", "idempotent_hint"]
    # read-only makes the omitted destructive hint irrelevant; idempotent stays cautious
    assert meta["effective_annotations"] == {
        "read_only_hint": True,
        "destructive_hint": False,
        "open_world_hint": False,
        "idempotent_hint": False,
    }


def test_metadata_of_a_contradictory_tool_takes_the_cautious_reading() -> None:
    meta = tool_metadata(
        tool(add, annotations=tool_annotations(read_only_hint=True, destructive_hint=True))
    )
    assert meta["annotations"] == {"read_only_hint": True, "destructive_hint": True}
    assert meta["effective_annotations"]["read_only_hint"] is False
    assert meta["effective_annotations"]["destructive_hint"] is True


def test_explicit_not_read_only_without_destructive_is_destructive() -> None:
    eff = effective_annotations(tool_annotations(read_only_hint=False))
    assert eff["destructive_hint"] is True
    eff = effective_annotations(tool_annotations(read_only_hint=False, destructive_hint=False))
    assert eff == {
        "read_only_hint": False,
        "destructive_hint": False,
        "open_world_hint": True,
        "idempotent_hint": False,
    }


def test_title_is_not_a_hint_in_metadata() -> None:
    meta = tool_metadata(tool(add, annotations={"title": "Adder"}))
    assert meta["annotations"] == {}
    assert len(meta["missing_annotations"]) == 4


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            ToolSource(type="package", package="deputy_shiny"),
            {"type": "package", "package": "deputy_shiny"},
        ),
        (
            ToolSource(type="mcp", server="github", remote_name="list_issues"),
            {
                "type": "mcp",
                "server": "github",
                "tool": "list_issues",
                "remote_name": "list_issues",
            },
        ),
    ],
)
def test_metadata_source_shapes(source: ToolSource, expected: dict[str, Any]) -> None:
    assert tool_metadata(tool(add, source=source))["source"] == expected


def test_metadata_needs_a_tool() -> None:
    with pytest.raises(InvalidToolError):
        tool_metadata(add)  # type: ignore[arg-type]


def test_tool_source_is_frozen_and_strict() -> None:
    with pytest.raises(ValidationError):
        ToolSource(type="plugin")
    with pytest.raises(ValidationError):
        ToolSource(type="package", pkg="x")  # type: ignore[call-arg]


# --------------------------------------------------------------------------- format_tool_output


@dataclasses.dataclass
class Pair:
    left: int
    right: Path


class Opaque:
    def __str__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        (None, ""),
        (True, "true"),
        (3, "3"),
        (2.5, "2.5"),
        ({"a": [1, 2], "b": None}, '{"a":[1,2],"b":null}'),
        ([1, "two"], '[1,"two"]'),
        ((1, 2), "[1,2]"),
        ({1: "int key"}, '{"1":"int key"}'),
        (Point(x=1), '{"x":1,"y":0}'),
        (Pair(1, Path("/tmp")), '{"left":1,"right":"/tmp"}'),
        ({"o": Opaque()}, '{"o":"<opaque>"}'),
        (Opaque(), "<opaque>"),
        (Path("/a/b"), "/a/b"),
        (b"caf\xc3\xa9", "café"),
        ({"data": b"\xff\x00"}, '{"data":"_wA="}'),  # URL-safe base64
    ],
)
def test_format_tool_output(value: Any, text: str) -> None:
    assert format_tool_output(value) == text


def test_binary_output_is_not_sent_to_the_model() -> None:
    text = format_tool_output(b"\x89PNG\r\n\x1a\n\x00\xff")
    assert text.startswith("[binary output: 10 bytes not shown")


def test_format_tool_output_never_raises() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no str")

        def __repr__(self) -> str:
            return "Broken()"

    assert format_tool_output(Broken()) == "Broken()"
    assert format_tool_output([Broken()]) == "[Broken()]"


def test_every_builtin_records_its_kind_and_custom_tools_have_none() -> None:
    from deputy_shiny import tools_all
    from deputy_shiny.permissions import tool_kind

    kinds = {t.name: t.kind for t in tools_all()}
    assert kinds == {
        "read_file": "read",
        "read_markdown": "read",
        "list_files": "read",
        "glob_files": "read",
        "grep_files": "read",
        "read_csv": "read",
        "write_file": "write",
        "edit_file": "write",
        "multi_edit": "write",
        "run_python": "code",
        "run_bash": "code",
        "web_fetch": "web",
        "web_search": "web",
        "ask_user": "ask",
    }
    assert all(tool_kind(t) == t.kind for t in tools_all())
    custom = tool(lambda: 1, name="read_file", description="Shadows a built-in's name.")
    assert custom.kind is None and tool_kind(custom) == "custom"
