"""Importing the package is cheap and offline: no litellm until the first request."""

from __future__ import annotations

import ast
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def test_import_does_not_load_litellm() -> None:
    code = (
        "import sys, deputy_shiny, deputy_shiny.testing\n"
        "from deputy_shiny import Agent\n"
        "from deputy_shiny.testing import ScriptedModel\n"
        "Agent(ScriptedModel(['x']))\n"
        "Agent('deputy/demo')\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_does_not_load_the_mcp_sdk() -> None:
    """The MCP SDK takes ~0.7 s to import: it loads on the first connection, not before."""
    code = (
        "import sys, deputy_shiny, deputy_shiny.mcp\n"
        "from deputy_shiny import Agent, load_mcp_config\n"
        "from deputy_shiny.testing import ScriptedModel\n"
        "Agent(ScriptedModel(['x'])).mcp_status()\n"
        "load_mcp_config({'mcpServers': {'t': {'command': 'mcp-server-time'}}})\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_litellm_is_configured_for_offline_use() -> None:
    code = (
        "import os\n"
        "from deputy_shiny.models._litellm import get_litellm\n"
        "litellm = get_litellm()\n"
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], litellm.suppress_debug_info)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "True True"


def test_version_comes_from_the_package_metadata() -> None:
    import importlib.metadata

    import deputy_shiny
    from deputy_shiny.shiny._chat_module import kit_dependency

    assert deputy_shiny.__version__ == importlib.metadata.version("deputy_shiny")
    assert str(kit_dependency().version) == deputy_shiny.__version__


def fresh_modules(code: str) -> set[str]:
    """The names in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    script = f"import sys\n{code}\nprint('\\n'.join(sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


# Every public name of the package (but the version), and the test models: all that the
# package root used to import.
EVERYTHING = (
    "import deputy_shiny, deputy_shiny.testing\n"
    "for name in deputy_shiny.__all__:\n"
    "    if name != '__version__':\n"
    "        getattr(deputy_shiny, name)\n"
)

# What the package imports on first use, not with itself (each costs 30-50 ms to import).
# importlib.metadata comes with jsonschema, the version, or pydantic's plugin scan, which
# runs as the first model's validator is built.
LAZY_IMPORTS = ("jsonschema", "regex", "importlib.metadata", "pydantic.plugin._loader")

# Prints the package's model classes in this process: how many, and which are built.
MODEL_STATE = """
import json, pydantic
def models(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from models(sub)
ours = {m for m in models(pydantic.BaseModel) if m.__module__.startswith('deputy_shiny')}
built = sorted(m.__name__ for m in ours if m.__pydantic_complete__)
print(json.dumps({'models': len(ours), 'built': built}))
"""


def test_import_leaves_the_heavy_dependencies_to_their_first_use() -> None:
    loaded = fresh_modules(EVERYTHING)
    assert {name for name in LAZY_IMPORTS if name in loaded} == set()
    heavy = ("litellm", "shiny", "shinychat", "mcp", "sqlalchemy", "alembic", "psycopg")
    assert not {m for m in loaded if m.split(".")[0] in (*heavy, "aiosqlite")}


def test_the_lazy_dependencies_load_when_used(tmp_path: Path) -> None:
    """Each import moved to its user: a JSON-schema tool, a grep, the version."""
    (tmp_path / "a.txt").write_text("needle\n")
    code = (
        "import asyncio\n"
        "import deputy_shiny\n"
        "from deputy_shiny import tool, tool_grep_files\n"
        "from deputy_shiny.tools._context import ToolContext, tool_context\n"
        "t = tool(lambda x: x, name='echo', description='Echo.',\n"
        "         arguments={'type': 'object', 'properties': {'x': {'type': 'string'}}})\n"
        "grep = tool_grep_files()\n"
        f"root = {str(tmp_path.resolve())!r}\n"
        "with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=())):\n"
        "    found = asyncio.run(grep.invoke(grep.parse_arguments({'pattern': 'need'})))\n"
        "assert 'a.txt:1: needle' in found, found\n"
        "assert deputy_shiny.__version__\n"
    )
    loaded = fresh_modules(code)
    assert {"jsonschema", "regex", "importlib.metadata"} <= loaded


def model_state(code: str) -> dict[str, Any]:
    """The package's models after ``code`` runs in a fresh interpreter (see MODEL_STATE)."""
    out = subprocess.run([sys.executable, "-c", code + MODEL_STATE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    state: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return state


def test_import_builds_no_pydantic_validator() -> None:
    """Every model of the package is ``defer_build``: none is built at import, none made."""
    state = model_state(EVERYTHING)
    assert state["models"] > 50
    assert state["built"] == []


def test_the_warm_up_helper_builds_every_deferred_model() -> None:
    state = model_state(
        EVERYTHING + "from deputy_shiny._util.config import complete_deferred_models\n"
        "assert complete_deferred_models() > 50\n"
        "assert complete_deferred_models() == 0\n"
    )
    assert len(state["built"]) == state["models"] > 50


def test_warm_up_leaves_no_model_to_build_on_a_users_first_run() -> None:
    state = model_state(EVERYTHING + "deputy_shiny.warm_up()\n")
    assert len(state["built"]) == state["models"] > 50


def test_warm_up_after_a_refused_tool_still_warms_and_runs() -> None:
    """A tool refused for a parameter pydantic cannot describe leaves its half-made
    arguments model among pydantic's classes until the collector runs (it failed CI
    once, when the worker had run that test first): the warm-up skips it."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, socket\n"
            "gc.disable()  # keep the half-made class alive, as a busy process may\n"
            "import deputy_shiny\n"
            "from deputy_shiny import Agent, tool\n"
            "from deputy_shiny.errors import InvalidToolError\n"
            "from deputy_shiny.testing import ScriptedModel, ScriptedReply\n"
            "def f(sock: socket.socket) -> str:\n"
            "    'Uses a socket.'\n"
            "    return ''\n"
            "try:\n"
            "    tool(f)\n"
            "except InvalidToolError as e:\n"
            "    print('refused:', e)\n"
            "deputy_shiny.warm_up()\n"
            "print(Agent(ScriptedModel([ScriptedReply(text='hi')])).run_sync('x').response)\n",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "refused: tool 'f': cannot describe parameter 'sock'" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "hi"


# ------------------------------------------------------------------ the lazy package root


def type_checking_imports() -> dict[str, tuple[str, ...]]:
    """The imports the root declares for type checkers: ``{".module": (names...)}``."""
    source = (Path(__file__).resolve().parent.parent / "deputy_shiny" / "__init__.py").read_text()
    block = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        "." + (node.module or ""): tuple(alias.name for alias in node.names)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
    }


def test_the_roots_names_agree_for_type_checkers_and_at_runtime() -> None:
    import deputy_shiny

    exports = deputy_shiny._EXPORTS
    assert type_checking_imports() == exports
    names = [name for names in exports.values() for name in names]
    assert len(names) == len(set(names))
    assert sorted(deputy_shiny.__all__) == sorted([*names, "__version__"])


def test_every_public_name_is_its_modules_object() -> None:
    code = (
        "import importlib, deputy_shiny\n"
        "for missing in ('Agentt', 'shiny', 'testing', '_engine'):\n"  # not made up on demand
        "    assert not hasattr(deputy_shiny, missing), missing\n"
        "for module, names in deputy_shiny._EXPORTS.items():\n"
        "    source = importlib.import_module(module, 'deputy_shiny')\n"
        "    for name in names:\n"
        "        assert getattr(deputy_shiny, name) is getattr(source, name), name\n"
        "from deputy_shiny import Agent, warm_up, DEMO_MODEL\n"
        "from deputy_shiny import *\n"
        "assert tool_read_file().name == 'read_file' and isinstance(__version__, str)\n"
        "assert set(deputy_shiny.__all__) <= set(dir(deputy_shiny))\n"
        "assert deputy_shiny.errors.McpError.__name__ == 'McpError'\n"
    )
    fresh_modules(code)


def test_import_deputy_shiny_loads_no_submodule_until_a_name_is_read() -> None:
    loaded = fresh_modules("import deputy_shiny")
    ours = {m for m in loaded if m.startswith("deputy_shiny.")}
    assert ours <= {"deputy_shiny._util", "deputy_shiny._util.version"}, ours
    assert "pydantic" not in loaded
    loaded = fresh_modules("from deputy_shiny import Agent")
    assert "deputy_shiny.agent._agent" in loaded
    assert not {"deputy_shiny.shiny", "deputy_shiny.testing", "litellm"} & loaded


def import_seconds(code: str) -> float:
    """Wall seconds a fresh interpreter spends running ``code`` (its start-up not counted)."""
    timed = f"import time\n_t = time.perf_counter()\n{code}\nprint(time.perf_counter() - _t)\n"
    out = subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip().splitlines()[-1])


def test_import_time_against_pydantic_in_the_same_run() -> None:
    """Against importing pydantic and making one model, in the same run (interleaved
    medians, so machine load falls on both sides): ``import deputy_shiny`` costs less
    (about 0.03x here), ``from deputy_shiny import Agent`` under 10x (about 2x here; an
    eager litellm import would be 25x)."""
    baseline = "import pydantic\nclass M(pydantic.BaseModel):\n    x: int = 0\nM()"
    samples: dict[str, list[float]] = {"pydantic": [], "root": [], "agent": []}
    for _ in range(3):
        samples["pydantic"].append(import_seconds(baseline))
        samples["root"].append(import_seconds("import deputy_shiny"))
        samples["agent"].append(import_seconds("from deputy_shiny import Agent"))
    pydantic, root, agent = (statistics.median(v) for v in samples.values())
    assert root < pydantic, samples
    assert agent < 10 * pydantic, samples
