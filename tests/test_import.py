"""Importing the package is cheap and offline: no litellm until the first request."""

from __future__ import annotations

import subprocess
import sys


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
