"""The README's Python examples run, in order, offline, and their assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert len(blocks) >= 4
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert commands[0].strip() == "./scripts/run-app"
    assert commands[1].strip() == "./scripts/test"
    assert "./scripts/test" in (README.parent / ".ci" / "run").read_text()


def test_readme_shows_an_app_without_a_key_and_a_local_endpoint() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    # An agent factory on FunctionModel (an app of one's own, with its own tools, offline).
    assert any("FunctionModel(" in b and "def make_offline_agent(ctx)" in b for b in blocks)
    assert any("ChatModel(" in b and "api_base=" in b for b in blocks)


def test_readme_shows_the_browser_test_as_it_runs() -> None:
    """The README's browser-test example is ``examples/test_express_app.py``, verbatim."""
    text = README.read_text()
    example = (README.parent / "examples" / "test_express_app.py").read_text()
    assert f"```py\n{example}```" in text
