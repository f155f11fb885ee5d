"""Importing the package is cheap and offline: no litellm until the first request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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


# What the package imports on first use, not with itself (each costs 30-50 ms to import).
LAZY_IMPORTS = ("jsonschema", "regex")


def test_import_leaves_the_heavy_dependencies_to_their_first_use() -> None:
    loaded = fresh_modules("import deputy_shiny")
    assert {name for name in LAZY_IMPORTS if name in loaded} == set()
    assert not {m for m in loaded if m.split(".")[0] in ("litellm", "shiny", "shinychat", "mcp")}


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
