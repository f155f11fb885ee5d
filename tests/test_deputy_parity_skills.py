"""The rest of deputy (#37), skills: the bundled example skill, ``skill_load``'s
SKILL.md path and ``check_requirements=``, and the standard library in requirements.
Each test ports deputy's own use of the row."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from deputy_shiny import Agent
from deputy_shiny.skills import (
    BUNDLED_SKILLS,
    SkillLoadError,
    bundled_skill,
    skill_check_requirements,
    skill_load,
    skills_list,
)
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

CSV = "species,mass,seen\nAdelie,3750,2007-11-11\nGentoo,5000,2008-01-02\nAdelie,NA,2009-05-06\n"


def test_the_bundled_data_analysis_skill_loads_with_its_tools_and_prompt() -> None:
    """deputy: ``skill_load(system.file("skills/data_analysis", package = "deputy"))``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its requirements are Python's own: no warning
        skill = skill_load(bundled_skill("data_analysis"))
    assert skill.name == "data_analysis" and skill.version == "1.0.0"
    assert [t.name for t in skill.tools] == ["eda_summary", "describe_column"]
    assert all(t.annotations.read_only_hint for t in skill.tools)
    assert "expert data analyst" in skill.prompt
    assert skill_check_requirements(skill).ok
    assert [s.name for s in skills_list(BUNDLED_SKILLS)] == ["data_analysis"]
    with pytest.raises(SkillLoadError, match="they are: data_analysis"):
        bundled_skill("nope")


def test_an_agent_with_the_bundled_skill_analyses_a_csv_in_its_working_dir(
    tmp_path: Path,
) -> None:
    """deputy: ``agent$load_skill(skill)`` then a run that calls the skill's tools."""
    (tmp_path / "penguins.csv").write_text(CSV, encoding="utf-8")
    calls = [
        ScriptedToolCall("eda_summary", {"path": "penguins.csv"}),
        ScriptedToolCall("describe_column", {"path": "penguins.csv", "column": "mass"}),
        ScriptedToolCall("describe_column", {"path": "penguins.csv", "column": "species"}),
        ScriptedToolCall("describe_column", {"path": "penguins.csv", "column": "seen"}),
        ScriptedToolCall("eda_summary", {"path": "../outside.csv"}),
    ]
    (tmp_path.parent / "outside.csv").write_text(CSV, encoding="utf-8")
    model = ScriptedModel([ScriptedReply(tool_calls=calls), "Done."])
    agent = Agent(model, working_dir=tmp_path)
    agent.load_skill(bundled_skill("data_analysis"))
    assert "## Skill: data_analysis" in (agent.get_system_prompt() or "")
    result = agent.run_sync("Describe penguins.csv")
    # In the order called (read-only calls may run side by side and end in any order).
    ends = {e.call_id: e.output for e in result.events if e.type == "tool_end"}
    outputs = [ends[e.call_id] for e in result.events if e.type == "tool_start"]
    assert "Rows: 3" in outputs[0] and "Columns: 3" in outputs[0]
    assert "mass (number): min=3750, max=5000, mean=4375, missing=1" in outputs[0]
    assert "species (text): 2 unique values, missing=0" in outputs[0]
    assert "Median: 4375" in outputs[1] and "Missing: 1 (33.3%)" in outputs[1]
    assert "Adelie: 2 (66.7%)" in outputs[2]
    assert "Earliest: 2007-11-11" in outputs[3] and "Span: 542 days" in outputs[3]
    # The skill's tools read under the agent's read permissions, as read_csv does.
    assert "outside" in outputs[4] and "Rows:" not in outputs[4]


def test_describe_column_names_the_columns_when_one_is_missing(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text(CSV, encoding="utf-8")
    calls = [ScriptedToolCall("describe_column", {"path": "d.csv", "column": "weight"})]
    agent = Agent(ScriptedModel([ScriptedReply(tool_calls=calls), "Ok."]), working_dir=tmp_path)
    agent.load_skill(bundled_skill("data_analysis"))
    end = next(e for e in agent.run_sync("x").events if e.type == "tool_end")
    assert end.is_error and "Column not found: 'weight'" in end.output
    assert "species, mass, seen" in end.output
