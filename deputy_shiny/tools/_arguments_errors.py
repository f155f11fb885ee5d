"""The model's raw tool arguments parsed, and the problems found in them worded for the model.

:class:`~deputy_shiny.tools._function_schema.ArgumentsSchema` parses the raw arguments
here (text, a mapping or nothing) and words its validation problems with these helpers:
a JSON path per problem, a short excerpt of the bad value, an example call, and the
union member pydantic tried (told apart from real keys by walking the JSON schema).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._util.json import loads_bounded
from ..errors import ToolArgumentsError
from ._descriptions import describe_schema

_MAX_PROBLEMS = 10
_EXCERPT = 80


def _example_call(json_schema: Mapping[str, Any]) -> str:
    props = json_schema.get("properties") or {}
    parts = [f'"{name}": <{describe_schema(s)}>' for name, s in list(props.items())[:6]]
    if len(props) > 6:
        parts.append("...")
    return "{" + ", ".join(parts) + "}"


def _short_json(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except Exception:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _arguments_error(tool_name: str, problems: list[str]) -> ToolArgumentsError:
    shown = problems[:_MAX_PROBLEMS]
    if len(problems) > len(shown):
        shown.append(f"... and {len(problems) - len(shown)} more problems")
    lines = "\n".join(f"- {p}" for p in shown)
    return ToolArgumentsError(
        f"Invalid arguments for tool {tool_name!r}:\n{lines}\n"
        "Fix the arguments and call the tool again.",
        tool_name=tool_name,
    )


def _parse_raw(
    raw: str | Mapping[str, Any] | None, tool_name: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """Parse the model's raw arguments into a dict; ``""``, ``None`` and ``null`` mean ``{}``."""
    example = _example_call(schema)
    if raw is None:
        return {}
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = loads_bounded(raw)
        except json.JSONDecodeError as e:
            if len(raw) <= _EXCERPT:
                excerpt = raw
            else:
                start = max(0, e.pos - _EXCERPT // 2)
                excerpt = raw[start : start + _EXCERPT]
                excerpt = (
                    ("..." if start else "")
                    + excerpt
                    + ("..." if start + _EXCERPT < len(raw) else "")
                )
            raise ToolArgumentsError(
                f"Invalid arguments for tool {tool_name!r}: not valid JSON ({e.msg} at line "
                f"{e.lineno} column {e.colno}) in {excerpt!r}. "
                f"Send the arguments as one JSON object, e.g. {example}.",
                tool_name=tool_name,
            ) from None
        if value is None:
            return {}
    else:
        value = raw
    if not isinstance(value, Mapping):
        kind = {
            list: "an array",
            str: "a string",
            bool: "a boolean",
            int: "a number",
            float: "a number",
        }
        what = kind.get(type(value), f"a {type(value).__name__}")
        raise ToolArgumentsError(
            f"Invalid arguments for tool {tool_name!r}: the arguments must be a JSON object "
            f"with named arguments, e.g. {example}, not {what} ({_short_json(value)}).",
            tool_name=tool_name,
        )
    return dict(value)


# --------------------------------------------------------------------------- error locations


_PYDANTIC_TAG_TYPES = {
    "int": "integer",
    "str": "string",
    "float": "number",
    "bool": "boolean",
    "none": "null",
    "list": "array",
    "dict": "object",
}


def _split_loc(
    loc: tuple[Any, ...], root: Mapping[str, Any]
) -> tuple[tuple[Any, ...], str | None, int]:
    """Split a pydantic error location into the value's path and the first union tag in it.

    Pydantic puts the name of the union member it tried into ``loc`` (``('x', 'int')``);
    walking the JSON schema alongside tells those tags from real keys. Returns
    ``(path without tags, first tag or None, index in path where that union sits)``.
    """
    defs = root.get("$defs", {}) if isinstance(root, Mapping) else {}
    node: Any = root
    path: list[Any] = []
    tag: str | None = None
    union_at = 0
    for part in loc:
        node = _resolve_ref(node, defs)
        branches = node.get("anyOf") or node.get("oneOf") if isinstance(node, Mapping) else None
        if isinstance(branches, list):
            real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(real) == 1:  # Optional[X]: pydantic adds no tag
                node = _resolve_ref(real[0], defs)
            elif isinstance(part, str) and isinstance(node, Mapping):
                mapping = (node.get("discriminator") or {}).get("mapping") or {}
                if part in mapping:  # a discriminated union picked its member: no failure
                    node = {"$ref": mapping[part]}
                    continue
                if tag is None:
                    tag, union_at = part, len(path)
                node = _pick_branch(real, part)
                continue
        if not isinstance(node, Mapping):
            path.append(part)
            continue
        path.append(part)
        properties = node.get("properties") or {}
        if isinstance(part, int):
            prefix = node.get("prefixItems")
            if isinstance(prefix, list) and part < len(prefix):
                node = prefix[part]
            else:
                node = node.get("items")
        elif part in properties:
            node = properties[part]
        else:
            extra = node.get("additionalProperties")
            node = extra if isinstance(extra, Mapping) else None
    return tuple(path), tag, union_at


def _resolve_ref(node: Any, defs: Mapping[str, Any]) -> Any:
    for _ in range(20):
        if not (isinstance(node, Mapping) and isinstance(node.get("$ref"), str)):
            return node
        node = defs.get(node["$ref"].rsplit("/", 1)[-1])
    return node


def _pick_branch(branches: list[Any], tag: str) -> Any:
    base = tag.split("[", 1)[0]
    for branch in branches:
        if not isinstance(branch, Mapping):
            continue
        ref = branch.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] == tag:
            return branch
        if branch.get("type") == _PYDANTIC_TAG_TYPES.get(base):
            return branch
    return None
