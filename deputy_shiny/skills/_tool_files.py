"""A skill's tool files: the ``tools:`` entries of a ``SKILL.md`` or ``SKILL.yaml``
checked (names, files inside the skill's folder, known fields) before anything is
imported, then each file executed once as a module of its own and its named function
or Tool taken (see :func:`deputy_shiny.skills.skill_load`).

Examples:
    >>> _module_name("data-analysis", Path("tools/clean.py")).startswith("_deputy_skill_")
    True
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from .._util.yaml import yaml_kind
from ..errors import InvalidToolError, SkillLoadError
from ..tools._tool import Tool, tool

# Each module a tool file runs as is named uniquely, so two skills never share one.
_module_counter = itertools.count(1)
_TOOL_KEYS = ("name", "file", "function", "description", "annotations")


class _ToolSpec:
    """One checked ``tools:`` entry: what to import, before anything is imported."""

    def __init__(
        self,
        where: str,
        file: Path,
        relative: str,
        function: str,
        name: str | None,
        description: str | None,
        annotations: Mapping[str, Any] | None,
    ) -> None:
        self.where = where
        self.file = file
        self.relative = relative
        self.function = function
        self.name = name
        self.description = description
        self.annotations = annotations


def _tool_specs(raw: Any, root: Path, path: Path) -> list[_ToolSpec]:
    if not isinstance(raw, list):
        raise SkillLoadError(
            f"{path}: field 'tools' must be a list of {{name, file, function}} entries, "
            f"got {yaml_kind(raw)}."
        )
    specs = []
    for index, entry in enumerate(raw):
        where = f"{path}: tools[{index}]"
        if not isinstance(entry, dict):
            raise SkillLoadError(
                f"{where}: must be a mapping with 'file' and 'function', got {yaml_kind(entry)}."
            )
        unknown = [str(k) for k in entry if k not in _TOOL_KEYS]
        if unknown:
            raise SkillLoadError(
                f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(_TOOL_KEYS)}."
            )
        for key in ("file", "function"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise SkillLoadError(f"{where}.{key}: required, and must be a non-empty string.")
        for key in ("name", "description"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise SkillLoadError(f"{where}.{key}: must be a string.")
        annotations = entry.get("annotations")
        if annotations is not None and not isinstance(annotations, dict):
            raise SkillLoadError(
                f"{where}.annotations: must be a mapping such as {{read_only_hint: true}}."
            )
        function = entry["function"].strip()
        if not function.isidentifier():
            raise SkillLoadError(
                f"{where}.function: {function!r} is not a Python name (an attribute of the file)."
            )
        relative = entry["file"].strip()
        specs.append(
            _ToolSpec(
                where=where,
                file=_tool_file(relative, root, f"{where}.file"),
                relative=relative,
                function=function,
                name=entry.get("name"),
                description=entry.get("description"),
                annotations=annotations,
            )
        )
    return specs


def _tool_file(relative: str, root: Path, where: str) -> Path:
    if "\x00" in relative:
        raise SkillLoadError(f"{where}: {relative!r} contains a NUL byte.")
    candidate = Path(relative)
    if candidate.is_absolute() or relative.startswith("~"):
        raise SkillLoadError(
            f"{where}: {relative!r} must be a path relative to the skill directory {str(root)!r}."
        )
    try:
        resolved = (root / candidate).resolve()
    except (OSError, RuntimeError) as exc:
        raise SkillLoadError(f"{where}: {relative!r} cannot be resolved ({exc}).") from None
    if not resolved.is_relative_to(root):
        raise SkillLoadError(
            f"{where}: {relative!r} leads outside the skill directory {str(root)!r} (to "
            f"{str(resolved)!r}); tool files must live inside it."
        )
    if not resolved.exists():
        raise SkillLoadError(f"{where}: {relative!r} does not exist in {str(root)!r}.")
    if not resolved.is_file():
        raise SkillLoadError(f"{where}: {relative!r} is not a file.")
    if resolved.suffix != ".py":
        raise SkillLoadError(f"{where}: {relative!r} is not a Python file (.py).")
    return resolved


def _module_name(skill_name: str, file: Path) -> str:
    stem = re.sub(r"\W", "_", file.stem)
    return f"_deputy_skill_{skill_name.replace('-', '_')}_{next(_module_counter)}_{stem}"


def _import_tools(specs: list[_ToolSpec], skill_name: str) -> list[Tool]:
    modules: dict[Path, ModuleType] = {}
    added: list[str] = []
    try:
        tools = []
        for spec in specs:
            module = modules.get(spec.file)
            if module is None:
                module = _exec_tool_file(spec, skill_name)
                modules[spec.file] = module
                added.append(module.__name__)
            tools.append(_tool_from(module, spec))
        return tools
    except BaseException:
        for name in added:
            sys.modules.pop(name, None)
        raise


def _exec_tool_file(spec: _ToolSpec, skill_name: str) -> ModuleType:
    name = _module_name(skill_name, spec.file)
    module_spec = importlib.util.spec_from_file_location(name, spec.file)
    if module_spec is None:
        raise SkillLoadError(f"{spec.where}.file: {spec.relative!r} cannot be imported.")
    module = importlib.util.module_from_spec(module_spec)
    try:
        source = spec.file.read_bytes()
    except OSError as exc:
        raise SkillLoadError(
            f"{spec.where}.file: {spec.relative!r} cannot be read ({exc.strerror or exc})."
        ) from None
    # Registered while it runs (dataclasses and pydantic models look their module up),
    # executed from source so that no __pycache__ is written into the skill directory.
    sys.modules[name] = module
    try:
        code = compile(source, str(spec.file), "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise SkillLoadError(
            f"{spec.where}.file: importing {spec.relative!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _tool_from(module: ModuleType, spec: _ToolSpec) -> Tool:
    where = f"{spec.where}.function"
    if spec.function not in module.__dict__:
        raise SkillLoadError(f"{where}: {spec.relative!r} defines no {spec.function!r}.")
    value = module.__dict__[spec.function]
    try:
        if isinstance(value, Tool):
            overrides: dict[str, Any] = {}
            if spec.name is not None and spec.name != value.name:
                overrides["name"] = spec.name
            if spec.description is not None:
                overrides["description"] = spec.description
            if spec.annotations is not None:
                overrides["annotations"] = spec.annotations
            return tool(value, **overrides) if overrides else value
        if callable(value):
            return tool(
                value,
                name=spec.name if spec.name is not None else spec.function,
                description=spec.description,
                annotations=spec.annotations,
            )
    except InvalidToolError as exc:
        message = str(exc)
        if "no description" in message:
            message = message.rstrip(".") + ", or give 'description' in this tools entry."
        raise SkillLoadError(f"{spec.where}: {message}") from None
    raise SkillLoadError(
        f"{where}: {spec.function!r} in {spec.relative!r} is a {type(value).__name__}, "
        "not a Tool or a function."
    )
