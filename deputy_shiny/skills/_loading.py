"""Reading skills from disk: :func:`skill_load` (the only place a skill's code runs) and
:func:`skills_list` (read, never run)."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any, NoReturn

from pydantic import (
    StrictStr,
    ValidationError,
)

from .._util.yaml import yaml_error_text, yaml_kind
from ..errors import SkillLoadError
from ._requirements import skill_check_requirements
from ._tool_files import _import_tools, _tool_specs
from ._values import Skill, _SkillValue

logger = logging.getLogger(__name__)

SKILL_MD = "SKILL.md"
SKILL_YAML = "SKILL.yaml"


_YAML_KEYS = ("name", "version", "description", "prompt", "requires", "tools")
_MD_KEYS = ("name", "version", "description", "requires", "tools")


def skill_load(path: str | os.PathLike[str], *, check_requirements: bool = True) -> Skill:
    """Load a skill from a directory holding ``SKILL.md`` and/or ``SKILL.yaml``.

    ``path`` is the skill's folder, or its ``SKILL.md`` or ``SKILL.yaml`` file (the
    folder is then the file's). With ``check_requirements`` (the default, as deputy's),
    its declared packages are checked (:func:`skill_check_requirements`, without a
    provider) before any tool file runs, and a :class:`UserWarning` names what is
    missing; the skill still loads. ``agent.load_skill()`` checks again, with the
    agent's provider.

    ``SKILL.md`` follows the Agent Skills format: YAML front matter between ``---``
    lines with ``name`` and ``description`` (also read: ``version``, ``requires``,
    ``tools``; other keys, such as ``license`` or ``allowed-tools``, are ignored), then
    a markdown body, which becomes the prompt.

    ``SKILL.yaml`` holds ``name``, ``version``, ``description``, ``prompt``,
    ``requires: {packages: [...], providers: [...]}`` and
    ``tools: [{name, file, function, description, annotations}]``; any other key is an
    error (this file is deputy_shiny's own, so a typo should not pass silently).

    With both files, SKILL.yaml's fields win and SKILL.md's front matter (optional
    then) fills in the rest; the prompt is SKILL.md's body, and giving a non-empty
    ``prompt`` in SKILL.yaml as well is an error.

    Each tool entry names a Python ``file`` inside the skill directory (``..`` or
    symlinks leading out, absolute paths and non-``.py`` files are refused) and a
    ``function``: an attribute of that file that is a Tool (used as is; ``name``,
    ``description`` and ``annotations`` given here override its own) or a plain
    function (wrapped with ``tool()``; ``name`` defaults to ``function`` and the
    description to its docstring). Every entry and every other field is checked before
    any file runs; then each declared file is executed once, as its own module (no
    ``__pycache__`` is written, and the skill directory is not put on ``sys.path``, so
    a tool file cannot import sibling files). This is the only place a skill's code
    runs: load only skills you trust.

    Raises :class:`SkillLoadError`, naming the file and field, for a missing
    directory, no SKILL.md or SKILL.yaml, invalid YAML (with its line), missing or
    malformed front matter, a missing name, and a tool file that is missing, escapes
    the directory, fails to import (with the exception) or lacks the function.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "SKILL.md").write_text(
        ...     "---\\nname: concise\\ndescription: Short answers.\\n---\\nBe brief.\\n")
        >>> s = skill_load(folder)
        >>> s.name, s.description, s.prompt
        ('concise', 'Short answers.', 'Be brief.')
        >>> skill_load(folder / "SKILL.md").name
        'concise'
    """
    root = _skill_root(path)
    fields, origin = _read_fields(root)
    tool_specs = fields.pop("tools", None)
    # Validate every field, and every tool entry, before any tool file runs.
    skill = _validated_skill(fields, origin)
    if check_requirements:
        check = skill_check_requirements(skill)
        if not check.ok:
            warnings.warn(
                f"Skill {skill.name!r} has unmet requirements: " + " ".join(check.messages),
                UserWarning,
                stacklevel=2,
            )
    if tool_specs is None:
        return skill
    specs = _tool_specs(tool_specs, root, origin["tools"])
    tools = _import_tools(specs, skill.name)
    return _validated_skill({**fields, "tools": tools}, origin)


def _read_fields(root: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    """A skill directory's fields (``tools`` still unchecked) and the file each came from."""
    md_path, yaml_path = root / SKILL_MD, root / SKILL_YAML
    has_md, has_yaml = md_path.is_file(), yaml_path.is_file()
    if not has_md and not has_yaml:
        _no_skill_files(root)
    fields: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    # SKILL.md first, so that SKILL.yaml's fields overwrite its front matter's.
    body = _read_skill_md(md_path, fields, origin, has_yaml=has_yaml) if has_md else ""
    if has_yaml:
        _read_skill_yaml(yaml_path, fields, origin)
    body = body.strip()
    if body:
        given_prompt = fields.get("prompt")
        if isinstance(given_prompt, str) and given_prompt.strip():
            raise SkillLoadError(
                f"{yaml_path}: field 'prompt' is given, and {SKILL_MD} has a body too; "
                f"keep the prompt in one place (the body of {SKILL_MD}, or 'prompt')."
            )
        fields["prompt"], origin["prompt"] = body, md_path
    if "version" in fields:
        fields["version"] = _version_text(fields["version"], origin["version"])
    return fields, origin


class SkillInfo(_SkillValue):
    """One skill :func:`skills_list` found: what it says about itself (frozen).

    Attributes:
        name / version / description: From its SKILL.md front matter or SKILL.yaml.
        path: Its directory (absolute), ready for :func:`skill_load`.
        tools: The names of the tools it declares (their files are not run).
        error: Why :func:`skill_load` would refuse it (None: it reads cleanly); then
            ``name`` is the directory's name.
    """

    name: StrictStr
    path: StrictStr
    version: StrictStr = "0.0.0"
    description: StrictStr = ""
    tools: tuple[StrictStr, ...] = ()
    error: StrictStr | None = None


def skills_list(path: str | os.PathLike[str] = "skills") -> list[SkillInfo]:
    """The skills in the folders under ``path``, by folder name, read but never run.

    Each subfolder holding ``SKILL.md`` and/or ``SKILL.yaml`` is a skill, checked as
    :func:`skill_load` checks it, but no tool file runs. One that :func:`skill_load`
    would refuse (bad YAML, no front matter, a tool file outside its folder, a near
    miss such as ``skill.md``) is listed with ``error`` saying why and logged at
    WARNING: one broken skill neither hides the others nor passes silently. Other
    folders, and hidden ones, are skipped. It only reads local files, like
    :func:`skill_load`; on an event loop, call it through ``asyncio.to_thread``.

    Raises :class:`SkillLoadError` when ``path`` does not exist, is not a folder, or
    is a skill folder itself (pass its parent, or use :func:`skill_load`).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "concise").mkdir()
        >>> _ = (root / "concise" / "SKILL.md").write_text(
        ...     "---\\nname: concise\\ndescription: Short answers.\\n---\\nBe brief.\\n")
        >>> [(s.name, s.description, s.error) for s in skills_list(root)]
        [('concise', 'Short answers.', None)]
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise SkillLoadError(f"skills_list() needs the path of a folder, got {path!r:.60}.")
    given = Path(path)
    if not given.is_dir():
        what = "is not a folder" if given.exists() else "does not exist"
        raise SkillLoadError(f"Skills folder {str(given)!r} {what}.")
    root = given.resolve()
    if (root / SKILL_MD).is_file() or (root / SKILL_YAML).is_file():
        raise SkillLoadError(
            f"{str(root)!r} is a skill folder itself; pass the folder that holds skill "
            "folders, or load this one with skill_load()."
        )
    found = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        names = {p.name.lower() for p in folder.iterdir()}
        if not names & {"skill.md", "skill.yaml", "skill.yml"}:
            continue
        found.append(_skill_info(folder.resolve()))
    return found


def _skill_info(folder: Path) -> SkillInfo:
    """One folder's SkillInfo; a SkillLoadError becomes its ``error``."""
    try:
        fields, origin = _read_fields(folder)
        specs = fields.pop("tools", None)
        skill = _validated_skill(fields, origin)
        tools = [] if specs is None else _tool_specs(specs, folder, origin["tools"])
    except SkillLoadError as exc:
        logger.warning("skills_list: %s cannot be loaded: %s", folder, exc)
        return SkillInfo(name=folder.name, path=str(folder), error=str(exc))
    return SkillInfo(
        name=skill.name,
        path=str(folder),
        version=skill.version,
        description=skill.description,
        tools=tuple(spec.name or spec.function for spec in tools),
    )


def _skill_root(path: str | os.PathLike[str]) -> Path:
    """The resolved skill directory ``path`` names, or SkillLoadError saying what is wrong."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise SkillLoadError(f"skill_load() needs the path of a skill directory, got {path!r:.60}.")
    given = Path(path)
    if not given.exists():
        raise SkillLoadError(f"Skill directory {str(given)!r} does not exist.")
    if given.is_file() and given.name in (SKILL_MD, SKILL_YAML):
        return given.parent.resolve()  # deputy's skill_load takes a SKILL.md path too
    if not given.is_dir():
        raise SkillLoadError(
            f"{str(given)!r} is not a directory; pass the skill's folder, which holds "
            f"{SKILL_MD} and/or {SKILL_YAML}, or one of those files."
        )
    return given.resolve()


def _no_skill_files(root: Path) -> NoReturn:
    """Raise for a directory with neither file, naming near misses such as ``skill.md``."""
    near = sorted(
        p.name for p in root.iterdir() if p.name.lower() in ("skill.md", "skill.yaml", "skill.yml")
    )
    hint = f" (found {', '.join(near)}; the names must be exactly these)" if near else ""
    raise SkillLoadError(
        f"Skill directory {str(root)!r} has neither {SKILL_MD} nor {SKILL_YAML}{hint}."
    )


def _read_skill_md(
    md_path: Path, fields: dict[str, Any], origin: dict[str, Path], *, has_yaml: bool
) -> str:
    """Record SKILL.md's front matter fields in ``fields`` (and ``origin``); its body.

    Without a SKILL.yaml beside it, the front matter is required and must give a name
    and a description.
    """
    front, body, offset = _split_front_matter(_read_text(md_path), md_path, has_yaml)
    if front is None:
        return body
    meta = _parse_yaml(front, md_path, offset)
    if not isinstance(meta, dict):
        raise SkillLoadError(
            f"{md_path}: the front matter must be a YAML mapping of 'key: value' "
            f"lines, got {yaml_kind(meta)}."
        )
    for key in _MD_KEYS:
        if meta.get(key) is not None:
            fields[key], origin[key] = meta[key], md_path
    if not has_yaml:
        for key in ("name", "description"):
            value = meta.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                raise SkillLoadError(
                    f"{md_path}: the front matter lacks the required field {key!r}."
                )
    return body


def _read_skill_yaml(yaml_path: Path, fields: dict[str, Any], origin: dict[str, Path]) -> None:
    """Record SKILL.yaml's fields in ``fields`` (and ``origin``); an unknown key is an error."""
    meta = _parse_yaml(_read_text(yaml_path), yaml_path, 0)
    if not isinstance(meta, dict):
        raise SkillLoadError(
            f"{yaml_path}: must be a YAML mapping of 'key: value' lines, got {yaml_kind(meta)}."
        )
    unknown = [str(k) for k in meta if k not in _YAML_KEYS]
    if unknown:
        raise SkillLoadError(
            f"{yaml_path}: unknown field {unknown[0]!r}; the fields are {', '.join(_YAML_KEYS)}."
        )
    for key in _YAML_KEYS:
        if meta.get(key) is not None:
            fields[key], origin[key] = meta[key], yaml_path
    if "name" not in fields:
        raise SkillLoadError(f"{yaml_path}: missing the required field 'name'.")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise SkillLoadError(f"{path}: not UTF-8 text ({exc.reason}).") from None
    except OSError as exc:
        raise SkillLoadError(f"{path}: cannot be read ({exc.strerror or exc}).") from None


def _split_front_matter(text: str, path: Path, optional: bool) -> tuple[str | None, str, int]:
    """(front matter or None, body, line offset of the front matter in the file)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        if optional:
            return None, text, 0
        raise SkillLoadError(
            f"{path}: no YAML front matter: the file must start with a '---' line, then "
            "'name:' and 'description:' lines, then another '---' line, then the prompt."
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :]), 1
    raise SkillLoadError(f"{path}: the front matter opened on line 1 has no closing '---' line.")


def _parse_yaml(text: str, path: Path, line_offset: int) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SkillLoadError(f"{path}: {yaml_error_text(exc, line_offset)}.") from None


def _version_text(value: Any, path: Path) -> Any:
    if isinstance(value, bool):
        return value  # let validation report it
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise SkillLoadError(
            f"{path}: field 'version' is the number {value!r}; quote it (version: "
            '"1.10"), since YAML reads 1.10 as 1.1.'
        )
    return value


def _validated_skill(fields: dict[str, Any], origin: dict[str, Path]) -> Skill:
    try:
        return Skill.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = err["loc"]
            where = ".".join(str(part) for part in loc) or "value"
            source = origin.get(str(loc[0])) if loc else None
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{source or 'skill'}: field {where}: {message}")
        raise SkillLoadError("; ".join(problems) + ".") from None
