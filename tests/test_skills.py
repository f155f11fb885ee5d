"""Specification of deputy_shiny.skills: Skill values, requirement checks, skill_load, helpers."""

from __future__ import annotations

import asyncio
import builtins
import copy
import os
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny.errors import ConfigurationError
from deputy_shiny.skills import (
    Skill,
    SkillCheck,
    SkillError,
    SkillLoadError,
    SkillRequirements,
    prepare_skill,
    skill_check_requirements,
    skill_create,
    skill_load,
    skill_prompt_section,
)
from deputy_shiny.tools import Tool, tool, tool_annotations

READ_ONLY = tool_annotations(read_only_hint=True, open_world_hint=False)


def make_counter() -> Tool:
    """A tool that holds state in its closure: the number of calls so far."""
    calls = {"n": 0}

    def count_calls() -> int:
        """Count how often this tool was called."""
        calls["n"] += 1
        return calls["n"]

    return tool(count_calls, annotations=READ_ONLY)


def write_skill(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return folder


def warm_up(folder: Path) -> None:
    """Load and check a skill once, so the loader's own lazy imports are done."""
    write_skill(folder, {"SKILL.yaml": "name: warm\nversion: 1.0.0\nrequires: {packages: [x]}\n"})
    skill_check_requirements(skill_load(folder), provider="openai")


TOOLS_PY = '''
from deputy_shiny.tools import tool, tool_annotations

LOADS = []
LOADS.append(1)


@tool(annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
def shout(text: str) -> str:
    """Shout a text."""
    return text.upper() + "!"


def whisper(text: str) -> str:
    """Whisper a text."""
    return text.lower() + "..."


def undocumented(text: str) -> str:
    return text


NOT_CALLABLE = 42
'''


# --------------------------------------------------------------------------- values


def test_skill_defaults_differ_from_skill_create():
    s = Skill(name="concise")
    assert (s.version, s.description, s.prompt, s.tools) == ("0.0.0", "", "", ())
    assert s.requires == SkillRequirements()
    assert s.requires.packages == () and s.requires.providers == ()
    assert skill_create("concise").version == "1.0.0"
    assert skill_create("concise", version="2.1").version == "2.1"


def test_skill_and_requirements_are_frozen():
    s = skill_create("concise", prompt="Be brief.", requires={"packages": ["pydantic"]})
    with pytest.raises(ValidationError):
        s.prompt = "Be long."  # type: ignore[misc]
    with pytest.raises(ValidationError):
        s.requires.packages = ()  # type: ignore[misc]
    assert isinstance(s.tools, tuple) and isinstance(s.requires.packages, tuple)
    assert s.prompt == "Be brief."
    assert hash(s) == hash(s)


def test_errors_are_configuration_errors():
    assert issubclass(SkillError, ConfigurationError)
    assert issubclass(SkillLoadError, SkillError)


def test_model_copy_keeps_the_same_tool_objects_and_validates():
    counter = make_counter()
    original = skill_create("counting", prompt="Count.", tools=[counter])
    revised = original.model_copy(update={"prompt": "Count carefully."})
    assert revised is not original and revised != original
    assert (revised.prompt, original.prompt) == ("Count carefully.", "Count.")
    assert revised.tools[0] is counter and original.tools[0] is counter
    revised.tools[0]()
    assert original.tools[0]() == 2  # one closure, one state
    assert original.model_copy(deep=True).tools[0] is counter
    assert copy.deepcopy(original).tools[0] is counter
    # Rebuilding from the fields (the R example's do.call(Skill, fields)) shares them too.
    rebuilt = Skill(**{**dict(original), "prompt": "Count once."})
    assert rebuilt.tools[0] is counter and rebuilt.prompt == "Count once."
    with pytest.raises(SkillError, match="name"):
        original.model_copy(update={"name": "Not Valid"})
    with pytest.raises(SkillError, match=r"tools\.0"):
        original.model_copy(update={"tools": [print]})
    with pytest.raises(SkillError, match="colour"):
        original.model_copy(update={"colour": "red"})


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"name": ""}, "name"),
        ({"name": "Data Analysis"}, "name"),
        ({"name": "-starts-with-dash"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": 3}, "name"),
        ({"name": "ok", "version": "not a version"}, "version"),
        ({"name": "ok", "version": 1}, "version"),
        ({"name": "ok", "description": None}, "description"),
        ({"name": "ok", "prompt": ["a"]}, "prompt"),
        ({"name": "ok", "tools": [make_counter(), len]}, "tools.1"),
        ({"name": "ok", "tools": ["count_calls"]}, "tools.0"),
        ({"name": "ok", "tools": make_counter()}, "tools"),
        ({"name": "ok", "requires": "pandas"}, "requires"),
        ({"name": "ok", "requires": {"packages": ["pandas>=2", "not valid!"]}}, "packages.1"),
        ({"name": "ok", "requires": {"packages": [3]}}, "packages.0"),
        ({"name": "ok", "requires": {"providers": ["open ai"]}}, "providers.0"),
        ({"name": "ok", "requires": {"package": ["pandas"]}}, "requires.package"),
        ({"name": "ok", "colour": "red"}, "colour"),
    ],
)
def test_bad_fields_name_the_field(fields: dict[str, Any], where: str):
    with pytest.raises(SkillError) as info:
        Skill(**fields)
    assert where in str(info.value)


def test_bad_tool_names_say_how_to_fix():
    with pytest.raises(SkillError, match=r"tools\.0: .*got builtin_function_or_method; wrap"):
        skill_create("x", tools=[len])  # type: ignore[list-item]
    counter = make_counter()
    with pytest.raises(SkillError, match="both named 'count_calls'"):
        skill_create("x", tools=[counter, make_counter()])


def test_requirements_accept_one_string_and_normalise_providers():
    req = SkillRequirements(packages="pandas>=2", providers=["OpenAI", " anthropic "])
    assert req.packages == ("pandas>=2",)
    assert req.providers == ("openai", "anthropic")
    s = Skill(name="x", requires={"packages": ["pydantic"]})
    assert isinstance(s.requires, SkillRequirements) and s.requires.packages == ("pydantic",)
    assert Skill(name="x", requires=req).requires is req


# --------------------------------------------------------------------------- requirements


def test_check_installed_unsatisfied_and_missing_packages():
    s = skill_create(
        "analysis",
        requires={"packages": ["pydantic", "pydantic>=99", "surely-not-installed-pkg-xyz"]},
    )
    check = skill_check_requirements(s)
    assert isinstance(check, SkillCheck)
    assert check.ok is False
    assert check.missing_packages == ("pydantic>=99", "surely-not-installed-pkg-xyz")
    assert check.provider_mismatch is False
    assert len(check.messages) == 2
    assert "pydantic>=99" in check.messages[0] and "is installed" in check.messages[0]
    assert "not installed" in check.messages[1]

    ok = skill_check_requirements(skill_create("fine", requires={"packages": ["pydantic>=2"]}))
    assert (ok.ok, ok.missing_packages, ok.messages) == (True, (), ())


def test_check_normalises_names_and_skips_markers_that_do_not_apply():
    s = skill_create(
        "x",
        requires={
            "packages": [
                "PyYAML",
                "docstring_parser",
                "surely-not-installed-pkg-xyz; python_version < '3'",
            ]
        },
    )
    assert skill_check_requirements(s).ok


def test_check_reads_metadata_and_never_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A distribution whose package would fail loudly if anything imported it.
    dist = tmp_path / "fake_skill_dep_xyz-1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-skill-dep-xyz\nVersion: 1.2\n", encoding="utf-8"
    )
    package = tmp_path / "fake_skill_dep_xyz"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported!')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    imported: list[str] = []
    real_import = builtins.__import__

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    ok = skill_check_requirements(skill_create("x", requires={"packages": "fake-skill-dep-xyz>=1"}))
    too_old = skill_check_requirements(
        skill_create("x", requires={"packages": "fake_skill_dep_xyz>=2"})
    )
    monkeypatch.setattr(builtins, "__import__", real_import)

    assert ok.ok
    assert too_old.missing_packages == ("fake_skill_dep_xyz>=2",)
    assert "1.2 is installed" in too_old.messages[0]
    assert "fake_skill_dep_xyz" not in sys.modules
    assert not [name for name in imported if "fake_skill_dep" in name]


@pytest.mark.parametrize(
    ("provider", "mismatch"),
    [
        (None, False),
        ("anthropic", False),
        ("Anthropic", False),
        ("anthropic/claude-sonnet-4", False),
        ("openai", True),
        ("openai/gpt-4o", True),
    ],
)
def test_provider_mismatch(provider: str | None, mismatch: bool):
    s = skill_create("claude-only", requires={"providers": ["anthropic"]})
    check = skill_check_requirements(s, provider=provider)
    assert check.provider_mismatch is mismatch
    assert check.ok is not mismatch
    assert check.missing_packages == ()
    if mismatch:
        assert "anthropic" in check.messages[0] and "openai" in check.messages[0]


def test_no_provider_mismatch_when_the_skill_names_none():
    assert skill_check_requirements(skill_create("any"), provider="openai").ok


@pytest.mark.parametrize("provider", ["", "  ", 3])
def test_check_rejects_a_malformed_provider(provider: Any):
    with pytest.raises(SkillError, match="provider"):
        skill_check_requirements(skill_create("x"), provider=provider)


def test_check_needs_a_skill():
    with pytest.raises(SkillError, match="needs a Skill"):
        skill_check_requirements("concise")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- skill_load


def test_load_skill_md_only(tmp_path: Path):
    folder = write_skill(
        tmp_path / "concise",
        {
            "SKILL.md": """
            ---
            name: concise
            description: Short answers.
            license: MIT
            allowed-tools: Read Grep
            metadata:
              author: someone
            requires:
              packages: [pydantic]
              providers: [anthropic]
            ---

            # Concise

            Answer in one short paragraph.
            """
        },
    )
    s = skill_load(folder)
    assert (s.name, s.description, s.version) == ("concise", "Short answers.", "0.0.0")
    assert s.prompt == "# Concise\n\nAnswer in one short paragraph."
    assert s.requires == SkillRequirements(packages=("pydantic",), providers=("anthropic",))
    assert s.tools == ()
    assert skill_load(str(folder)) == s


def test_load_skill_yaml_only(tmp_path: Path):
    folder = write_skill(
        tmp_path / "analysis",
        {
            "SKILL.yaml": """
            name: analysis
            version: "1.10"
            description: Analyse data.
            prompt: Use the tools.
            requires:
              packages: [pydantic>=2]
              providers: [openai, anthropic]
            """
        },
    )
    s = skill_load(folder)
    assert (s.name, s.version, s.description, s.prompt) == (
        "analysis",
        "1.10",
        "Analyse data.",
        "Use the tools.",
    )
    assert s.requires.packages == ("pydantic>=2",)
    assert s.requires.providers == ("openai", "anthropic")


def test_load_integer_version_and_empty_values(tmp_path: Path):
    folder = write_skill(tmp_path / "s", {"SKILL.yaml": "name: s\nversion: 2\ndescription:\n"})
    s = skill_load(folder)
    assert (s.version, s.description, s.prompt) == ("2", "", "")


def test_load_both_files_yaml_wins_and_prompt_is_the_body(tmp_path: Path):
    folder = write_skill(
        tmp_path / "both",
        {
            "SKILL.md": """
            ---
            name: from-md
            description: From SKILL.md.
            version: 0.1.0
            requires:
              packages: [pydantic]
            ---
            The prompt from SKILL.md.
            """,
            "SKILL.yaml": """
            name: from-yaml
            version: 2.0.0
            """,
        },
    )
    s = skill_load(folder)
    assert (s.name, s.version) == ("from-yaml", "2.0.0")
    assert s.description == "From SKILL.md."  # SKILL.yaml does not give one
    assert s.requires.packages == ("pydantic",)
    assert s.prompt == "The prompt from SKILL.md."


def test_load_both_files_md_without_front_matter_is_all_prompt(tmp_path: Path):
    folder = write_skill(
        tmp_path / "plain",
        {"SKILL.md": "# Heading\n\nBe kind.\n", "SKILL.yaml": "name: plain\n"},
    )
    s = skill_load(folder)
    assert (s.name, s.prompt, s.description) == ("plain", "# Heading\n\nBe kind.", "")


def test_load_both_files_prompt_in_two_places_is_an_error(tmp_path: Path):
    folder = write_skill(
        tmp_path / "twice",
        {"SKILL.md": "Body prompt.\n", "SKILL.yaml": "name: twice\nprompt: YAML prompt.\n"},
    )
    with pytest.raises(SkillLoadError, match=r"SKILL\.yaml: field 'prompt'"):
        skill_load(folder)


def test_load_tools_tool_attribute_and_plain_functions(tmp_path: Path):
    folder = write_skill(
        tmp_path / "voice",
        {
            "tools.py": TOOLS_PY,
            "SKILL.yaml": """
            name: voice
            tools:
              - file: tools.py
                function: shout
              - name: yell
                file: ./tools.py
                function: shout
              - file: tools.py
                function: whisper
                annotations: {read_only_hint: true}
              - name: echo
                file: sub/../tools.py
                function: undocumented
                description: Repeat a text.
            """,
        },
    )
    s = skill_load(folder)
    shout, yell, whisper, echo = s.tools
    assert [t.name for t in s.tools] == ["shout", "yell", "whisper", "echo"]
    module = sys.modules[shout.fn.__module__]
    assert module.LOADS == [1]  # one file, executed once for all its tools
    assert shout is module.shout  # a Tool attribute is used as is
    assert shout.annotations.read_only_hint is True
    assert yell.fn is shout.fn and yell.annotations == shout.annotations
    assert whisper.description == "Whisper a text."
    assert whisper.annotations.read_only_hint is True
    assert echo.description == "Repeat a text."
    assert shout("hi") == "HI!"
    assert asyncio.run(whisper.invoke(whisper.parse_arguments('{"text": "HI"}'))) == "hi..."
    assert not (folder / "__pycache__").exists()


def test_load_tools_declared_in_skill_md_front_matter(tmp_path: Path):
    folder = write_skill(
        tmp_path / "md-tools",
        {
            "lib/voice.py": TOOLS_PY,
            "SKILL.md": """
            ---
            name: md-tools
            description: Tools from SKILL.md.
            tools:
              - {file: lib/voice.py, function: whisper}
            ---
            Whisper.
            """,
        },
    )
    s = skill_load(folder)
    assert [t.name for t in s.tools] == ["whisper"]


def test_load_tool_files_with_dataclasses_and_postponed_annotations(tmp_path: Path):
    folder = write_skill(
        tmp_path / "typed",
        {
            "typed_tools.py": '''
            from __future__ import annotations

            import dataclasses


            @dataclasses.dataclass
            class Point:
                x: int
                y: int


            def norm1(x: int, y: int) -> int:
                """Manhattan length of a point."""
                p = Point(x, y)
                return abs(p.x) + abs(p.y)
            ''',
            "SKILL.yaml": """
            name: typed
            tools: [{file: typed_tools.py, function: norm1}]
            """,
        },
    )
    (norm1,) = skill_load(folder).tools
    assert norm1.parameters["required"] == ["x", "y"]
    assert norm1(3, -4) == 7


def test_load_runs_only_declared_files(tmp_path: Path):
    folder = write_skill(
        tmp_path / "careful",
        {
            "tools.py": TOOLS_PY,
            "undeclared.py": "raise RuntimeError('undeclared file ran')\n",
            "helpers/__init__.py": "raise RuntimeError('package ran')\n",
            "SKILL.yaml": "name: careful\ntools: [{file: tools.py, function: whisper}]\n",
        },
    )
    warm_up(tmp_path / "warm")
    before = set(sys.modules)
    s = skill_load(folder)
    added = set(sys.modules) - before
    assert added == {s.tools[0].fn.__module__}
    assert s.tools[0].fn.__module__.startswith("_deputy_skill_careful_")


def test_building_and_checking_skills_runs_nothing(tmp_path: Path):
    folder = write_skill(
        tmp_path / "lazy",
        {"SKILL.md": "---\nname: lazy\ndescription: Lazy.\n---\nBe lazy.\n"},
    )
    warm_up(tmp_path / "warm")
    before = set(sys.modules)
    s = skill_load(folder)
    skill_check_requirements(s, provider="openai")
    skill_prompt_section(prepare_skill(s))
    assert set(sys.modules) == before


def test_each_load_gets_fresh_modules(tmp_path: Path):
    folder = write_skill(
        tmp_path / "voice",
        {
            "tools.py": TOOLS_PY,
            "SKILL.yaml": "name: voice\ntools: [{file: tools.py, function: shout}]\n",
        },
    )
    first, second = skill_load(folder), skill_load(folder)
    assert first.tools[0] is not second.tools[0]
    assert first.tools[0].fn.__module__ != second.tools[0].fn.__module__


# --------------------------------------------------------------------------- load errors


def test_load_missing_directory_and_file_path(tmp_path: Path):
    with pytest.raises(SkillLoadError, match="does not exist"):
        skill_load(tmp_path / "nope")
    (tmp_path / "notes.md").write_text("---\nname: x\ndescription: X.\n---\n", encoding="utf-8")
    with pytest.raises(SkillLoadError, match="not a directory"):
        skill_load(tmp_path / "notes.md")
    with pytest.raises(SkillLoadError, match="path of a skill directory"):
        skill_load(42)  # type: ignore[arg-type]
    with pytest.raises(SkillLoadError, match="path of a skill directory"):
        skill_load("")


def test_load_neither_file(tmp_path: Path):
    (tmp_path / "README.md").write_text("hi", encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"neither SKILL\.md nor SKILL\.yaml"):
        skill_load(tmp_path)
    (tmp_path / "skill.yml").write_text("name: x\n", encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"found skill\.yml"):
        skill_load(tmp_path)


@pytest.mark.parametrize(
    ("files", "pattern"),
    [
        (
            {"SKILL.yaml": "name: x\ndescription: [unclosed\nversion: 1.0.0\n"},
            r"SKILL\.yaml: invalid YAML at line \d",
        ),
        (
            {"SKILL.md": "---\nname: x\ndescription: a: b: c\n---\nBody\n"},
            r"SKILL\.md: invalid YAML at line 3",
        ),
        ({"SKILL.md": "Just a prompt.\n"}, r"SKILL\.md: no YAML front matter"),
        ({"SKILL.md": "---\nname: x\ndescription: X.\nBody\n"}, r"SKILL\.md: .*no closing"),
        ({"SKILL.md": "---\n- name\n- x\n---\nBody\n"}, r"SKILL\.md: .*mapping.*a list"),
        ({"SKILL.md": "---\n---\nBody\n"}, r"SKILL\.md: .*mapping.*empty"),
        ({"SKILL.md": "---\ndescription: X.\n---\nBody\n"}, r"SKILL\.md: .*'name'"),
        ({"SKILL.md": "---\nname: x\n---\nBody\n"}, r"SKILL\.md: .*'description'"),
        ({"SKILL.yaml": "description: X.\n"}, r"SKILL\.yaml: missing the required field 'name'"),
        ({"SKILL.yaml": "- name\n"}, r"SKILL\.yaml: must be a YAML mapping"),
        ({"SKILL.yaml": ""}, r"SKILL\.yaml: must be a YAML mapping.*empty"),
        ({"SKILL.yaml": "name: x\nrequire: {}\n"}, r"SKILL\.yaml: unknown field 'require'"),
        ({"SKILL.yaml": "name: Bad Name\n"}, r"SKILL\.yaml: field name: .*not allowed"),
        ({"SKILL.yaml": "name: x\nversion: 1.10\n"}, r"SKILL\.yaml: field 'version'.*quote"),
        (
            {"SKILL.yaml": "name: x\nrequires: {packages: ['not valid!']}\n"},
            r"SKILL\.yaml: field requires\.packages\.0",
        ),
        (
            {"SKILL.md": "---\nname: x\ndescription: X.\nrequires: [a]\n---\n"},
            r"SKILL\.md: field requires",
        ),
    ],
)
def test_load_errors_name_the_file_and_field(tmp_path: Path, files: dict[str, str], pattern: str):
    folder = write_skill(tmp_path / "broken", files)
    with pytest.raises(SkillLoadError, match=pattern):
        skill_load(folder)


def test_load_non_utf8_file(tmp_path: Path):
    (tmp_path / "SKILL.yaml").write_bytes(b"name: \xff\n")
    with pytest.raises(SkillLoadError, match=r"SKILL\.yaml: not UTF-8"):
        skill_load(tmp_path)


@pytest.mark.parametrize(
    ("entry", "pattern"),
    [
        ("{file: missing.py, function: f}", r"tools\[0\]\.file: 'missing\.py' does not exist"),
        (
            "{file: ../outside.py, function: f}",
            r"tools\[0\]\.file: '\.\./outside\.py' leads outside",
        ),
        ("{file: /etc/hostname, function: f}", r"tools\[0\]\.file: .*must be a path relative"),
        ("{file: notes.txt, function: f}", r"tools\[0\]\.file: .*not a Python file"),
        ("{file: sub, function: f}", r"tools\[0\]\.file: 'sub' is not a file"),
        (
            "{file: boom.py, function: f}",
            r"tools\[0\]\.file: importing 'boom\.py' failed: "
            r"ZeroDivisionError: division by zero",
        ),
        ("{file: syntax.py, function: f}", r"importing 'syntax\.py' failed: SyntaxError"),
        ("{file: exits.py, function: f}", r"importing 'exits\.py' failed: SystemExit"),
        (
            "{file: tools.py, function: nowhere}",
            r"tools\[0\]\.function: 'tools\.py' defines no "
            r"'nowhere'",
        ),
        ("{file: tools.py, function: NOT_CALLABLE}", r"'NOT_CALLABLE' in 'tools\.py' is a int"),
        (
            "{file: tools.py, function: undocumented}",
            r"tools\[0\]: .*no description.*'description' in this tools entry",
        ),
        ("{file: tools.py, function: shout, name: 'bad name'}", r"tools\[0\]: .*Invalid tool name"),
        (
            "{file: tools.py, function: shout, annotations: {readonly: true}}",
            r"tools\[0\]: .*unknown annotation",
        ),
        ("{file: tools.py}", r"tools\[0\]\.function: required"),
        ("{function: shout}", r"tools\[0\]\.file: required"),
        ("{file: tools.py, function: 'a.b'}", r"tools\[0\]\.function: 'a\.b' is not a Python name"),
        ("{file: tools.py, function: shout, module: x}", r"tools\[0\]: unknown field 'module'"),
        ("tools.py", r"tools\[0\]: must be a mapping"),
    ],
)
def test_tool_entry_errors(tmp_path: Path, entry: str, pattern: str):
    (tmp_path / "outside.py").write_text("def f():\n    '''F.'''\n", encoding="utf-8")
    folder = write_skill(
        tmp_path / "skill",
        {
            "tools.py": TOOLS_PY,
            "boom.py": "1 / 0\n",
            "syntax.py": "def f(:\n",
            "exits.py": "raise SystemExit(3)\n",
            "notes.txt": "not python\n",
            "sub/keep.txt": "",
            "SKILL.yaml": f"name: skill\ntools:\n  - {entry}\n",
        },
    )
    with pytest.raises(SkillLoadError, match=pattern) as info:
        skill_load(folder)
    assert "SKILL.yaml" in str(info.value)


def test_tools_field_must_be_a_list(tmp_path: Path):
    folder = write_skill(tmp_path / "s", {"SKILL.yaml": "name: s\ntools: {file: a.py}\n"})
    with pytest.raises(SkillLoadError, match=r"SKILL\.yaml: field 'tools' must be a list"):
        skill_load(folder)


def test_duplicate_tool_names_in_a_loaded_skill(tmp_path: Path):
    folder = write_skill(
        tmp_path / "s",
        {
            "tools.py": TOOLS_PY,
            "SKILL.yaml": """
            name: s
            tools:
              - {file: tools.py, function: shout}
              - {file: tools.py, function: whisper, name: shout}
            """,
        },
    )
    with pytest.raises(SkillLoadError, match=r"SKILL\.yaml: field tools: .*both named 'shout'"):
        skill_load(folder)


def test_symlinks_out_of_the_skill_directory_are_refused(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("raise RuntimeError('ran')\n", encoding="utf-8")
    folder = write_skill(tmp_path / "skill", {})
    os.symlink(outside / "evil.py", folder / "linked.py")
    os.symlink(outside, folder / "linked_dir")
    for file in ("linked.py", "linked_dir/evil.py"):
        (folder / "SKILL.yaml").write_text(
            f"name: skill\ntools: [{{file: {file}, function: f}}]\n", encoding="utf-8"
        )
        with pytest.raises(SkillLoadError, match="leads outside the skill directory"):
            skill_load(folder)


def test_symlinks_inside_the_skill_directory_are_fine(tmp_path: Path):
    folder = write_skill(tmp_path / "skill", {"real/tools.py": TOOLS_PY})
    os.symlink(folder / "real" / "tools.py", folder / "alias.py")
    (folder / "SKILL.yaml").write_text(
        "name: skill\ntools: [{file: alias.py, function: whisper}]\n", encoding="utf-8"
    )
    assert skill_load(folder).tools[0].name == "whisper"


def test_the_skill_directory_itself_may_be_a_symlink(tmp_path: Path):
    real = write_skill(
        tmp_path / "real",
        {
            "tools.py": TOOLS_PY,
            "SKILL.yaml": "name: s\ntools: [{file: tools.py, function: shout}]\n",
        },
    )
    os.symlink(real, tmp_path / "link")
    assert skill_load(tmp_path / "link").tools[0].name == "shout"


def test_every_entry_and_field_is_checked_before_any_file_runs(tmp_path: Path):
    marker_py = """
    from pathlib import Path
    Path(__file__).with_name("ran.txt").write_text("ran")

    def f() -> int:
        '''F.'''
        return 1
    """
    folder = write_skill(
        tmp_path / "s",
        {
            "marker.py": marker_py,
            "SKILL.yaml": """
            name: s
            tools:
              - {file: marker.py, function: f}
              - {file: ../escape.py, function: f}
            """,
        },
    )
    with pytest.raises(SkillLoadError, match="leads outside"):
        skill_load(folder)
    (folder / "SKILL.yaml").write_text(
        "name: Not Valid\ntools: [{file: marker.py, function: f}]\n", encoding="utf-8"
    )
    with pytest.raises(SkillLoadError, match="field name"):
        skill_load(folder)
    assert not (folder / "ran.txt").exists()
    (folder / "SKILL.yaml").write_text(
        "name: s\ntools: [{file: marker.py, function: f}]\n", encoding="utf-8"
    )
    assert skill_load(folder).tools[0]() == 1
    assert (folder / "ran.txt").exists()


def test_a_failed_load_leaves_no_modules_behind(tmp_path: Path):
    folder = write_skill(
        tmp_path / "s",
        {
            "tools.py": TOOLS_PY,
            "boom.py": "raise ValueError('boom')\n",
            "SKILL.yaml": """
            name: s
            tools:
              - {file: tools.py, function: shout}
              - {file: boom.py, function: f}
            """,
        },
    )
    warm_up(tmp_path / "warm")
    before = set(sys.modules)
    with pytest.raises(SkillLoadError, match="ValueError: boom") as info:
        skill_load(folder)
    assert isinstance(info.value.__cause__, ValueError)
    assert set(sys.modules) == before


# --------------------------------------------------------------------------- agent helpers


def test_prepare_skill(tmp_path: Path):
    s = skill_create("concise", prompt="Be brief.")
    assert prepare_skill(s) is s
    folder = write_skill(
        tmp_path / "concise", {"SKILL.md": "---\nname: concise\ndescription: C.\n---\nBe brief.\n"}
    )
    assert prepare_skill(folder).prompt == "Be brief."
    assert prepare_skill(str(folder)).name == "concise"
    with pytest.raises(SkillLoadError):
        prepare_skill(tmp_path / "missing")
    for bad in (42, {"name": "concise"}, None):
        with pytest.raises(ConfigurationError, match="needs a Skill"):
            prepare_skill(bad)  # type: ignore[arg-type]


def test_skill_prompt_section():
    assert (
        skill_prompt_section(skill_create("concise", prompt="  Be brief.\n"))
        == "\n\n## Skill: concise\nBe brief."
    )
    assert skill_prompt_section(skill_create("tools-only")) == ""
    assert skill_prompt_section(skill_create("blank", prompt=" \n ")) == ""
    with pytest.raises(SkillError, match="needs a Skill"):
        skill_prompt_section("concise")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- skills_list


def test_skills_list_reads_every_skill_folder_and_runs_no_tool_file(tmp_path: Path) -> None:
    from deputy_shiny.skills import SkillInfo, skills_list

    root = tmp_path / "skills"
    write_skill(
        root / "concise",
        {"SKILL.md": "---\nname: concise\ndescription: Short answers.\n---\nBe brief.\n"},
    )
    write_skill(
        root / "b-tools",
        {
            "SKILL.yaml": """
                name: counting
                version: "2.1"
                description: Counts.
                tools:
                  - {file: tools.py, function: count}
                  - {file: tools.py, function: other, name: renamed}
            """,
            # Listing must never run a skill's code: this file would fail if it ran.
            "tools.py": "raise SystemExit('skills_list ran a tool file')\n",
        },
    )
    (root / "notes").mkdir()  # no skill files: not a skill
    write_skill(root / ".hidden", {"SKILL.md": "---\nname: hidden\ndescription: x\n---\n"})
    (root / "README.md").write_text("not a skill folder")

    found = skills_list(root)

    assert found == [
        SkillInfo(
            name="counting",
            path=str((root / "b-tools").resolve()),
            version="2.1",
            description="Counts.",
            tools=("count", "renamed"),
        ),
        SkillInfo(
            name="concise", path=str((root / "concise").resolve()), description="Short answers."
        ),
    ]
    assert skill_load(found[1].path).prompt == "Be brief."


def test_skills_list_reports_a_broken_skill_and_keeps_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from deputy_shiny.skills import skills_list

    root = tmp_path / "skills"
    write_skill(root / "good", {"SKILL.md": "---\nname: good\ndescription: Fine.\n---\nOk.\n"})
    write_skill(root / "corrupt", {"SKILL.md": "---\nname: [unclosed\ndescription: x\n---\n"})
    write_skill(root / "bare", {"SKILL.md": "No front matter at all.\n"})
    write_skill(root / "lower", {"skill.md": "---\nname: lower\ndescription: x\n---\n"})
    write_skill(
        root / "escape", {"SKILL.yaml": "name: esc\ntools: [{file: ../x.py, function: f}]\n"}
    )

    with caplog.at_level("WARNING", logger="deputy_shiny.skills"):
        found = {info.path.rsplit(os.sep, 1)[-1]: info for info in skills_list(root)}

    assert sorted(found) == ["bare", "corrupt", "escape", "good", "lower"]
    assert found["good"].error is None and found["good"].name == "good"
    for folder, says in [
        ("corrupt", "SKILL.md"),
        ("bare", "no YAML front matter"),
        ("lower", "found skill.md"),
        ("escape", "tools[0].file"),
    ]:
        info = found[folder]
        assert info.name == folder and info.error is not None and says in info.error, info
    assert sum("cannot be loaded" in r.getMessage() for r in caplog.records) == 4


def test_skills_list_refuses_a_path_that_is_no_skills_folder(tmp_path: Path) -> None:
    from deputy_shiny.skills import skills_list

    with pytest.raises(SkillLoadError, match="does not exist"):
        skills_list(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(SkillLoadError, match="is not a folder"):
        skills_list(tmp_path / "file.txt")
    write_skill(tmp_path / "one", {"SKILL.md": "---\nname: one\ndescription: x\n---\n"})
    with pytest.raises(SkillLoadError, match="is a skill folder itself"):
        skills_list(tmp_path / "one")
    with pytest.raises(SkillLoadError, match="needs the path"):
        skills_list(3)  # type: ignore[arg-type]
    assert [info.name for info in skills_list(tmp_path)] == ["one"]  # its parent lists it


def test_load_takes_the_skill_md_or_yaml_path_as_deputy_does(tmp_path: Path):
    """deputy: ``skill_load("path/to/SKILL.md")`` loads the skill of that folder."""
    (tmp_path / "SKILL.md").write_text(
        "---\nname: concise\ndescription: Short.\n---\nBe brief.\n", encoding="utf-8"
    )
    assert skill_load(tmp_path / "SKILL.md").prompt == "Be brief."
    (tmp_path / "SKILL.yaml").write_text("version: 2.0.0\n", encoding="utf-8")
    assert skill_load(str(tmp_path / "SKILL.yaml")).version == "2.0.0"


def test_load_warns_of_unmet_requirements_unless_told_not_to(tmp_path: Path):
    """deputy: ``skill_load(path, check_requirements = TRUE)`` warns, and still loads."""
    (tmp_path / "SKILL.yaml").write_text(
        "name: needy\nrequires:\n  packages: [surely-absent-pkg, json]\n", encoding="utf-8"
    )
    with pytest.warns(UserWarning, match="'needy' has unmet requirements.*surely-absent-pkg"):
        assert skill_load(tmp_path).name == "needy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert skill_load(tmp_path, check_requirements=False).name == "needy"


def test_standard_library_modules_are_never_missing():
    """deputy's ``requires = list(packages = "base")`` is ok; Python's analogue is the
    standard library: ``json`` has no distribution, yet it is there."""
    check = skill_check_requirements(
        skill_create("stdlib", requires={"packages": ["json", "csv", "statistics"]})
    )
    assert check.ok and check.missing_packages == ()
    older = skill_check_requirements(skill_create("old", requires={"packages": ["json<3"]}))
    assert not older.ok and older.missing_packages == ("json<3",)
