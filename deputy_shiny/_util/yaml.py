"""YAML for files a host reads but does not trust: a strict loader and shared helpers.

:func:`strict_yaml_load` reads plain data only: mappings with string keys, lists, and
the scalars YAML 1.1 resolves implicitly (strings, numbers, booleans, null, dates). It
refuses, before building anything, what plain data never needs and attacks do: any tag
(``!!python/object``, ``!!str``, ``!custom``), anchors and aliases (so no
billion-laughs expansion), duplicate keys, non-string keys (and so merge keys
``<<``), more than one document, and nesting deeper than ``max_depth``. Problems raise
:class:`StrictYamlError` with the line, for the caller to wrap in its own error type.

``yaml`` is imported where it is used, keeping ``import deputy_shiny`` lean.

Examples:
    >>> strict_yaml_load("version: 1\\ntools: [read_file]\\n")
    {'version': 1, 'tools': ['read_file']}
    >>> strict_yaml_load("a: &x 1\\nb: *x\\n")
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.StrictYamlError: line 1: anchors (&name) are not allowed
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StrictYamlError

if TYPE_CHECKING:
    import yaml

__all__ = ["StrictYamlError", "strict_yaml_load", "yaml_error_text", "yaml_kind"]

DEFAULT_MAX_DEPTH = 32
"""How deeply collections may nest in :func:`strict_yaml_load` by default."""

_CORE_PREFIX = "tag:yaml.org,2002:"
_STR_TAG = _CORE_PREFIX + "str"


def yaml_kind(value: Any) -> str:
    """What a parsed YAML value is, for error messages ("a list", "an empty document").

    Examples:
        >>> yaml_kind(None), yaml_kind([1]), yaml_kind("x"), yaml_kind(3)
        ('an empty document', 'a list', 'a string', 'a int')
    """
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def yaml_error_text(exc: yaml.YAMLError, line_offset: int = 0) -> str:
    """A one-line description of a PyYAML error: ``"invalid YAML at line 3: <problem>"``.

    ``line_offset`` is added to the line (for YAML embedded in a larger file).

    Examples:
        >>> import yaml
        >>> try:
        ...     yaml.safe_load("a: [1")
        ... except yaml.YAMLError as exc:
        ...     print(yaml_error_text(exc))
        invalid YAML at line 1: while parsing a flow sequence: expected ',' or ']', but got '<stream end>'
    """  # noqa: E501
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1 + line_offset}" if mark is not None else ""
        problem = ": ".join(p for p in (exc.context, exc.problem) if p) or "cannot be parsed"
        return f"invalid YAML{where}: {problem}"
    return f"invalid YAML: {' '.join(str(exc).split())}"


def strict_yaml_load(text: str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse one YAML document of plain data, refusing tags, anchors, aliases and the rest.

    See the module docstring for what is refused. Raises :class:`StrictYamlError`.

    Examples:
        >>> strict_yaml_load("a: 1\\na: 2\\n")
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.StrictYamlError: line 2: duplicate key 'a' (first on line 1)
    """
    import yaml

    loader = _strict_loader_class()(text, max_depth)
    try:
        return loader.get_single_data()
    except StrictYamlError:
        raise
    except yaml.composer.ComposerError as exc:
        if exc.context == "expected a single document in the stream":
            line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
            raise StrictYamlError(
                "holds more than one YAML document ('---' separates documents); "
                "keep one document per file",
                line,
            ) from None
        raise StrictYamlError(yaml_error_text(exc)) from None
    except yaml.YAMLError as exc:
        raise StrictYamlError(yaml_error_text(exc)) from None
    except RecursionError:  # pragma: no cover - the depth cap comes first
        raise StrictYamlError(f"nested more than {max_depth} levels deep") from None
    finally:
        loader.dispose()


_LOADER: type | None = None


def _strict_loader_class() -> type:
    """The loader class, built on first use so that ``yaml`` is imported lazily."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _build_loader()
    return _LOADER


def _build_loader() -> type:
    import yaml
    from yaml.nodes import MappingNode, Node, ScalarNode

    class StrictLoader(yaml.SafeLoader):
        def __init__(self, stream: str, max_depth: int) -> None:
            super().__init__(stream)
            self._max_depth = max_depth
            self._depth = 0

        def compose_node(self, parent: Node | None, index: Any) -> Node | None:
            event = self.peek_event()
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.AliasEvent):
                raise StrictYamlError("aliases (*name) are not allowed", line)
            if getattr(event, "anchor", None) is not None:
                raise StrictYamlError("anchors (&name) are not allowed", line)
            tag = getattr(event, "tag", None)
            if tag is not None:
                shown = (
                    "!!" + tag.removeprefix(_CORE_PREFIX) if tag.startswith(_CORE_PREFIX) else tag
                )
                raise StrictYamlError(
                    f"YAML tags such as {shown!r:.60} are not allowed; write plain values", line
                )
            self._depth += 1
            try:
                if self._depth > self._max_depth:
                    raise StrictYamlError(f"nested more than {self._max_depth} levels deep", line)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
            first_line: dict[str, int] = {}
            for key_node, _ in node.value:
                line = key_node.start_mark.line + 1
                if not isinstance(key_node, ScalarNode):
                    raise StrictYamlError("keys must be strings, not lists or mappings", line)
                if key_node.tag != _STR_TAG:
                    raise StrictYamlError(
                        f"key {key_node.value!r:.60} is not a string; quote it or use a name",
                        line,
                    )
                if key_node.value in first_line:
                    raise StrictYamlError(
                        f"duplicate key {key_node.value!r:.60} "
                        f"(first on line {first_line[key_node.value]})",
                        line,
                    )
                first_line[key_node.value] = line
            return super().construct_mapping(node, deep=deep)

    return StrictLoader
