"""Specification of deputy_shiny.delegation.definitions: AgentDefinition, its strict YAML
file format (hostile files included), registry look-ups and atomic writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import skill_create, tool_read_file, tool_run_bash, tool_write_file
from deputy_shiny.delegation import (
    MAX_AGENT_DEFINITION_BYTES,
    AgentDefinition,
    agent_definition_read,
    agent_definition_resolve,
    agent_definition_write,
    definition_files,
    definitions,
)
from deputy_shiny.errors import AgentDefinitionError, ConfigurationError
from deputy_shiny.tools import Tool

READ = tool_read_file()
WRITE = tool_write_file()
BASH = tool_run_bash()
TOOLS: dict[str, Tool] = {t.name: t for t in (READ, WRITE, BASH)}
SKILL = skill_create("concise", prompt="Be brief.")
SKILLS = {"concise": SKILL}

MINIMAL = "version: 1\nname: helper\ndescription: Helps.\n"


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def read_error(path: Path, tools: Any = TOOLS, skills: Any = SKILLS) -> str:
    with pytest.raises(AgentDefinitionError) as info:
        agent_definition_read(path, tools, skills)
    message = str(info.value)
    assert message.startswith(str(path)), message  # every file error names the file
    return message


def full_definition() -> AgentDefinition:
    return AgentDefinition(
        name="code_reviewer",
        description="Reviews code: correctness, style and risks.",
        prompt="You review code.\n\n  Indented line.\nTrailing spaces  \nÜnïcödé ✓ \t tab\n",
        tools=["read_file", "write_file"],
        model="openai/gpt-4.1-mini",
        skills=["concise"],
        disallowed_tools=["run_bash"],
        max_requests=7,
        permission_mode="plan",
        mcp_servers=["github", "time.server"],
        initial_prompt="yes",  # YAML 1.1 would read a bare yes as True
    )


# --------------------------------------------------------------------------- the value


def test_defaults_and_frozen() -> None:
    d = AgentDefinition(name="helper", description="Helps.")
    assert (d.prompt, d.tools, d.model, d.skills, d.disallowed_tools) == ("", (), "inherit", (), ())
    assert (d.max_requests, d.permission_mode, d.mcp_servers, d.initial_prompt) == (
        None,
        None,
        (),
        None,
    )
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        d.name = "other"  # type: ignore[misc]
    assert issubclass(AgentDefinitionError, ConfigurationError)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "has space"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": "1starts_with_digit"}, "name"),
        ({"description": "  "}, "description"),
        ({"model": "not a model"}, "model"),
        ({"max_requests": 0}, "max_requests"),
        ({"max_requests": True}, "max_requests"),
        ({"permission_mode": "admin"}, "permission_mode"),
        ({"permission_mode": "inherit"}, "permission_mode"),
        ({"tools": ["read_file", "read_file"]}, "tools"),
        ({"tools": ["bad name"]}, "tools"),
        ({"skills": ["Upper"]}, "skills"),
        ({"mcp_servers": ["-x"]}, "mcp_servers"),
        ({"initial_prompt": " "}, "initial_prompt"),
        ({"tools": ["run_bash"], "disallowed_tools": ["Run_Bash"]}, "disallowed_tools"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_values_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(AgentDefinitionError, match=field):
        AgentDefinition(**{"name": "helper", "description": "Helps.", **fields})


def test_description_is_required() -> None:
    with pytest.raises(AgentDefinitionError, match="description"):
        AgentDefinition(name="helper")  # type: ignore[call-arg]


def test_model_copy_is_validated() -> None:
    d = AgentDefinition(name="helper", description="Helps.")
    assert d.model_copy(update={"permission_mode": "readonly"}).permission_mode == "readonly"
    with pytest.raises(AgentDefinitionError, match="permission_mode"):
        d.model_copy(update={"permission_mode": "root"})


# --------------------------------------------------------------------------- round trip


def test_round_trip_of_every_field(tmp_path: Path) -> None:
    d = full_definition()
    path = tmp_path / "reviewer.yaml"
    agent_definition_write(d, path)
    text = path.read_text()
    assert text.startswith("version: 1\nname: code_reviewer\ndescription: ")
    assert agent_definition_read(path, TOOLS, SKILLS) == d
    agent_definition_write(d, path, overwrite=True)
    assert path.read_text() == text  # stable output


def test_defaults_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "helper.yaml"
    agent_definition_write(AgentDefinition(name="helper", description="Helps."), path)
    assert path.read_text() == MINIMAL
    assert agent_definition_read(path, {}) == AgentDefinition(name="helper", description="Helps.")


@pytest.mark.parametrize(
    "text",
    ["null", "true", "1.0", "!tag", "*alias", "&anchor", "- item", "a: b", "#", "'", '"', "---"],
)
def test_strings_that_look_like_yaml_survive(tmp_path: Path, text: str) -> None:
    d = AgentDefinition(name="helper", description=text, prompt=text + "\n" + text)
    path = tmp_path / "helper.yaml"
    agent_definition_write(d, path)
    assert agent_definition_read(path, {}) == d


def test_a_utf8_bom_and_a_single_string_list_are_read(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "\ufeff" + MINIMAL + "tools: read_file\n")
    assert agent_definition_read(path, TOOLS).tools == ("read_file",)


# --------------------------------------------------------------------------- resolving


def test_resolve_gives_the_very_registry_objects() -> None:
    resolved = agent_definition_resolve(full_definition(), TOOLS, SKILLS)
    assert resolved.tools == (READ, WRITE)
    assert resolved.tools[0] is READ
    assert resolved.skills[0] is SKILL
    assert resolved.definition == full_definition()


@pytest.mark.parametrize(
    "registry",
    [TOOLS, [READ, WRITE, BASH], lambda name: TOOLS.get(name), TOOLS.__getitem__],
    ids=["mapping", "list", "callable", "callable-keyerror"],
)
def test_registry_shapes(registry: Any) -> None:
    d = AgentDefinition(name="helper", description="Helps.", tools=["read_file"])
    assert agent_definition_resolve(d, registry).tools == (READ,)
    with pytest.raises(AgentDefinitionError, match="unknown tool 'edit_file'"):
        agent_definition_resolve(d.model_copy(update={"tools": ["edit_file"]}), registry)


def test_a_registry_key_cannot_pass_one_tool_off_as_another() -> None:
    d = AgentDefinition(
        name="helper", description="Helps.", tools=["reader"], disallowed_tools=["run_bash"]
    )
    with pytest.raises(AgentDefinitionError, match="named 'run_bash'"):
        agent_definition_resolve(d, {"reader": BASH})


def test_registry_errors_are_reported() -> None:
    d = AgentDefinition(name="helper", description="Helps.", tools=["read_file"])

    def broken(name: str) -> Tool:
        raise RuntimeError("registry offline")

    with pytest.raises(AgentDefinitionError, match="registry offline"):
        agent_definition_resolve(d, broken)
    with pytest.raises(AgentDefinitionError, match="not a Tool"):
        agent_definition_resolve(d, {"read_file": "read_file"})  # type: ignore[arg-type]
    with pytest.raises(AgentDefinitionError, match="a mapping of name to Tool"):
        agent_definition_resolve(d, 42)  # type: ignore[arg-type]


def test_a_skill_keeps_its_tools_and_disallowed_tools_stay_names() -> None:
    """Denying is the lead's job (tool_denylist); resolving neither drops nor refuses."""
    shell = skill_create("shell", tools=[BASH, READ])
    d = AgentDefinition(
        name="helper", description="Helps.", skills=["shell"], disallowed_tools=["run_bash"]
    )
    resolved = agent_definition_resolve(d, TOOLS, [shell])
    assert resolved.skills == (shell,)
    assert resolved.skills[0].tools == (BASH, READ)
    assert resolved.definition.disallowed_tools == ("run_bash",)


# --------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("colour: red\n", "unknown field 'colour'"),
        ("permission_mode: admin\n", "field 'permission_mode': 'admin' is not a permission mode"),
        ("tools: [read_file, teleport]\n", "field 'tools': unknown tool 'teleport'"),
        ("skills: [verbose]\n", "field 'skills': unknown skill 'verbose'"),
        (
            "tools: [run_bash]\ndisallowed_tools: [run_bash]\n",
            "field 'disallowed_tools': 'run_bash' is also in tools",
        ),
        ("max_requests: -1\n", "field 'max_requests'"),
        ("model: [openai]\n", "field 'model'"),
        ("tools: [[read_file]]\n", "field 'tools.0'"),
    ],
)
def test_bad_fields(tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in read_error(write(tmp_path / "a.yaml", MINIMAL + extra))


def test_skills_without_a_skill_registry(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", MINIMAL + "skills: [concise]\n")
    assert "no skill registry was given" in read_error(path, skills=None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: helper\ndescription: Helps.\n", "field 'version': missing"),
        ("version: 2\nname: helper\ndescription: Helps.\n", "'version': 2 is not a supported"),
        ("version: '1'\nname: helper\ndescription: Helps.\n", "'version': '1' is not a supported"),
        ("version: 1.0\nname: helper\ndescription: Helps.\n", "'version': 1.0 is not a supported"),
        ("version: true\nname: helper\ndescription: Helps.\n", "'version': True is not a"),
        ("version: 1\nname: helper\n", "field 'description': missing"),
        ("version: 1\ndescription: Helps.\n", "field 'name': missing"),
        ("", "got an empty document"),
        ("- version: 1\n", "got a list"),
        ("just text\n", "got a string"),
        ("version: 1\nname: [unclosed\n", "invalid YAML at line 3"),
    ],
)
def test_bad_documents(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in read_error(write(tmp_path / "a.yaml", text))


# --------------------------------------------------------------------------- hostile YAML


@pytest.mark.parametrize(
    "text",
    [
        MINIMAL + "prompt: !!python/object/apply:os.system ['echo hi']\n",
        MINIMAL + "prompt: !!python/name:os.system\n",
        MINIMAL + "prompt: !!str 'typed'\n",
        MINIMAL + "max_requests: !!int '3'\n",
        MINIMAL + "prompt: !custom value\n",
        MINIMAL + "prompt: ! nonspecific\n",
        MINIMAL + "tools: !!set {read_file: null}\n",
        "--- !agent\n" + MINIMAL,
        "%TAG !e! tag:example.com,2000:\n---\n" + MINIMAL + "prompt: !e!thing x\n",
    ],
)
def test_every_tag_is_refused(tmp_path: Path, text: str) -> None:
    assert "YAML tags" in read_error(write(tmp_path / "a.yaml", text))


def test_an_os_system_payload_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payloads = [
        f"!!python/object/apply:os.system ['touch {marker}']\n",
        MINIMAL + f"prompt: !!python/object/apply:os.system ['touch {marker}']\n",
        MINIMAL + f"initial_prompt: !!python/object/new:os.system ['touch {marker}']\n",
        "version: 1\nname: helper\ndescription: Helps.\n"
        f"tools: [!!python/object/apply:subprocess.call [['touch', '{marker}']]]\n",
    ]
    for index, text in enumerate(payloads):
        read_error(write(tmp_path / f"evil{index}.yaml", text))
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "prompt: &p hello\ninitial_prompt: *p\n", "anchors"),
        (MINIMAL + "tools: &t [read_file]\n", "anchors"),
        (MINIMAL + "initial_prompt: *undefined\n", "aliases"),
    ],
)
def test_anchors_and_aliases_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in read_error(write(tmp_path / "a.yaml", text))


def test_billion_laughs_is_refused_at_once(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [" + ",".join([f"*{previous}"] * 9) + "]")
    text = MINIMAL + "\n".join(lines) + "\nprompt: *i\n"
    assert "line 4: anchors (&name) are not allowed" in read_error(write(tmp_path / "a.yaml", text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "name: again\n", "line 4: duplicate key 'name' (first on line 2)"),
        (MINIMAL + "description: again\n", "duplicate key 'description'"),
        (MINIMAL + "tools: [read_file]\nmcp_servers: {a: 1, a: 2}\n", "duplicate key 'a'"),
        (MINIMAL + "1: one\n", "key '1' is not a string"),
        (MINIMAL + "null: nothing\n", "key 'null' is not a string"),
        (MINIMAL + "true: yes\n", "key 'true' is not a string"),
        (MINIMAL + "<<: {prompt: merged}\n", "key '<<' is not a string"),
        (MINIMAL + "? [a, b]\n: pair\n", "keys must be strings"),
        (MINIMAL + "---\n" + MINIMAL, "more than one YAML document"),
        (MINIMAL + "tools: " + "[" * 40 + "]" * 40 + "\n", "nested more than 8 levels deep"),
        (MINIMAL + "tools: " + "[" * 100_000 + "\n", "nested more than 8 levels deep"),
    ],
)
def test_hostile_structure_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in read_error(write(tmp_path / "a.yaml", text))


def test_a_quoted_numeric_key_is_just_an_unknown_field(tmp_path: Path) -> None:
    assert "unknown field '1'" in read_error(write(tmp_path / "a.yaml", MINIMAL + "'1': x\n"))


# --------------------------------------------------------------------------- hostile files


def test_one_mib_is_allowed_and_one_byte_more_is_not(tmp_path: Path) -> None:
    padding = MAX_AGENT_DEFINITION_BYTES - len(MINIMAL) - 2
    exact = write(tmp_path / "exact.yaml", MINIMAL + "#" + "x" * padding + "\n")
    assert exact.stat().st_size == MAX_AGENT_DEFINITION_BYTES
    assert agent_definition_read(exact, {}).name == "helper"
    over = write(tmp_path / "over.yaml", MINIMAL + "#" + "x" * (padding + 1) + "\n")
    assert over.stat().st_size == MAX_AGENT_DEFINITION_BYTES + 1
    assert "is 1,048,577 bytes" in read_error(over)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as file:
        file.truncate(1 << 40)  # 1 TiB, sparse: reading it would never end
    assert "is 1,099,511,627,776 bytes" in read_error(huge)


def test_no_more_than_one_mib_is_read_even_when_the_size_lies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that grows between fstat and read (or a size that lies) is still capped."""
    path = write(tmp_path / "growing.yaml", MINIMAL + "#" + "x" * MAX_AGENT_DEFINITION_BYTES)
    real_fstat = os.fstat

    class SmallStat:
        def __init__(self, real: os.stat_result) -> None:
            self.st_mode = real.st_mode
            self.st_size = 10

    monkeypatch.setattr(definition_files.os, "fstat", lambda fd: SmallStat(real_fstat(fd)))
    assert "is over 1,048,576 bytes" in read_error(path)


def test_non_utf8_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "latin1.yaml", MINIMAL.encode() + "prompt: café\n".encode("latin-1"))
    assert "is not UTF-8 text" in read_error(path)


def test_paths_that_are_not_regular_readable_files(tmp_path: Path) -> None:
    assert "does not exist." in read_error(tmp_path / "missing.yaml")
    assert "is a directory" in read_error(tmp_path)
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "nowhere.yaml")
    assert "symlink to a missing file" in read_error(dangling)
    to_dir = tmp_path / "to_dir.yaml"
    to_dir.symlink_to(tmp_path)
    assert "is a directory" in read_error(to_dir)
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert "cannot be opened" in read_error(loop)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "is not a regular file" in read_error(fifo)  # and does not wait for a writer


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    real = write(tmp_path / "real.yaml", MINIMAL)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    assert agent_definition_read(link, {}).name == "helper"


def test_bad_path_arguments() -> None:
    with pytest.raises(AgentDefinitionError, match="path of a YAML file"):
        agent_definition_read("", {})
    with pytest.raises(AgentDefinitionError, match="path of a YAML file"):
        agent_definition_read(b"x.yaml", {})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- writing


def test_write_refuses_to_clobber_unless_asked(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", "old\n")
    d = AgentDefinition(name="helper", description="Helps.")
    with pytest.raises(AgentDefinitionError, match="already exists"):
        agent_definition_write(d, path)
    assert path.read_text() == "old\n"
    path.chmod(0o600)
    agent_definition_write(d, path, overwrite=True)
    assert path.read_text() == MINIMAL
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the old file's mode is kept


def test_write_never_goes_through_a_symlink(tmp_path: Path) -> None:
    elsewhere = write(tmp_path / "elsewhere.txt", "precious\n")
    link = tmp_path / "a.yaml"
    link.symlink_to(elsewhere)
    d = AgentDefinition(name="helper", description="Helps.")
    for overwrite in (False, True):
        with pytest.raises(AgentDefinitionError, match="is a symlink"):
            agent_definition_write(d, link, overwrite=overwrite)
    dangling = tmp_path / "b.yaml"
    dangling.symlink_to(tmp_path / "created-through-link.yaml")
    with pytest.raises(AgentDefinitionError, match="is a symlink"):
        agent_definition_write(d, dangling, overwrite=True)
    assert elsewhere.read_text() == "precious\n"
    assert not (tmp_path / "created-through-link.yaml").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml", "elsewhere.txt"]


def test_write_refuses_directories_and_missing_parents(tmp_path: Path) -> None:
    d = AgentDefinition(name="helper", description="Helps.")
    with pytest.raises(AgentDefinitionError, match="is a directory"):
        agent_definition_write(d, tmp_path, overwrite=True)
    with pytest.raises(AgentDefinitionError, match="does not exist"):
        agent_definition_write(d, tmp_path / "no" / "such" / "a.yaml")
    with pytest.raises(AgentDefinitionError, match="needs an AgentDefinition"):
        agent_definition_write({"name": "helper"}, tmp_path / "a.yaml")  # type: ignore[arg-type]


def test_write_refuses_what_could_not_be_read_back(tmp_path: Path) -> None:
    d = AgentDefinition(
        name="helper", description="Helps.", prompt="x" * MAX_AGENT_DEFINITION_BYTES
    )
    with pytest.raises(AgentDefinitionError, match="1 MiB"):
        agent_definition_write(d, tmp_path / "a.yaml")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_crash_mid_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "a.yaml"
    agent_definition_write(AgentDefinition(name="old", description="Old."), path)
    before = path.read_bytes()

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(definition_files.os, failing, crash)
    with pytest.raises(AgentDefinitionError, match=r"cannot be written \(No space left"):
        agent_definition_write(full_definition(), path, overwrite=True)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.yaml"]


def test_a_new_file_is_linked_into_place_and_the_temp_file_removed(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    agent_definition_write(full_definition(), path)
    assert [p.name for p in tmp_path.iterdir()] == ["new.yaml"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert agent_definition_read(path, TOOLS, SKILLS) == full_definition()


# --------------------------------------------------------------------------- packaging


def test_importing_the_package_does_not_import_yaml() -> None:
    code = (
        "import sys, deputy_shiny, deputy_shiny.delegation\n"
        "deputy_shiny.AgentDefinition(name='a', description='b')\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_exported_from_the_package() -> None:
    import deputy_shiny

    for name in ("AgentDefinition", "agent_definition"):
        assert getattr(deputy_shiny, name) is getattr(definitions, name)
        assert name in deputy_shiny.__all__
    for name in ("agent_definition_read", "agent_definition_write"):
        assert getattr(deputy_shiny, name) is getattr(definition_files, name)
        assert name in deputy_shiny.__all__


def test_the_write_order_covers_every_field() -> None:
    assert sorted(definition_files._WRITE_ORDER) == sorted(AgentDefinition.model_fields)
