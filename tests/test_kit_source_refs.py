"""shiny's source reference for its spans, read once per code object (``_source_refs``).

py-shiny 1.8 calls ``extract_source_ref`` for every Calc, Effect, renderer and
ExtendedTask it makes; the kit wraps it where shiny calls it with a memo. These tests pin
what the wrapper relies on (so a shiny upgrade that changes it fails here, not in
production), and that the memo changes nothing but the cost.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from shiny import reactive

import deputy_shiny.shiny  # noqa: F401 - installs the wrapper, as every kit app does
from deputy_shiny.shiny import _source_refs


def make_closure(label: str) -> Callable[[], str]:
    def render_label() -> str:  # a new function object per call: one per session
        return label

    return render_label


def test_shiny_still_reads_source_refs_through_the_function_the_kit_wraps() -> None:
    assert _source_refs.install()
    original = _source_refs._original
    assert original is not None and original.__module__ == "shiny.otel._attributes"
    for name in _source_refs._CALLERS:
        module = importlib.import_module(name)
        assert module.extract_source_ref is _source_refs.source_ref, name
    # Where shiny 1.8 calls it: an Effect's and a Calc's own attributes at creation.
    assert "extract_source_ref(" in inspect.getsource(reactive._reactives)
    assert "extract_source_ref(func)" in inspect.getsource(reactive._extended_task)


def test_each_code_object_is_read_once_and_each_caller_gets_its_own_dict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = _source_refs._original
    assert original is not None
    reads: list[str] = []

    def counting(func: Any) -> Any:
        reads.append(func.__name__)
        return original(func)

    monkeypatch.setattr(_source_refs, "_original", counting)
    monkeypatch.setattr(_source_refs, "_memo", {})
    first, second = make_closure("a"), make_closure("b")
    ref = _source_refs.source_ref(first)
    assert ref == original(first)  # the same reference shiny computes
    assert ref["code.function.name"] == "render_label"
    assert ref["code.line.number"] == inspect.getsourcelines(make_closure)[1] + 1
    ref["code.function.name"] = "changed"  # a caller's dict is its own
    assert _source_refs.source_ref(second) == original(second)
    assert reads == ["render_label"]  # the second session's closure was not read again


def test_a_callable_without_code_goes_to_shiny_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _source_refs._original
    assert original is not None
    monkeypatch.setattr(_source_refs, "_memo", {})
    assert _source_refs.source_ref(len) == original(len)  # a built-in: no code object
    assert _source_refs._memo == {}


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_source_refs, "_memo", {})
    monkeypatch.setattr(_source_refs, "LIMIT", 3)
    for index in range(7):
        namespace: dict[str, Any] = {}
        exec(f"def made_{index}():\n    return {index}\n", namespace)  # new code each time
        _source_refs.source_ref(namespace[f"made_{index}"])
    assert len(_source_refs._memo) <= 3


def test_effects_made_per_session_read_their_source_once(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _source_refs._original
    assert original is not None
    reads: list[str] = []

    def counting(func: Any) -> Any:
        reads.append(func.__name__)
        return original(func)

    monkeypatch.setattr(_source_refs, "_original", counting)
    monkeypatch.setattr(_source_refs, "_memo", {})

    def server() -> None:
        @reactive.effect
        def watch() -> None:
            pass

        watch.destroy()

    for _ in range(3):  # three sessions running the same server code
        server()
    assert reads.count("watch") == 1
