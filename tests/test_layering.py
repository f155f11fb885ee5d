"""The dependency direction of ARCHITECTURE.md holds, and the checker can tell when not.

The checks read source with ``ast`` (see tests/_layering.py): nothing is imported
except for rule 5, which imports the package in a fresh interpreter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._layering import (
    check_cycles,
    check_engine_independence,
    check_folder_cycles,
    check_models_independence,
    check_no_root_imports,
    check_no_test_models,
    check_policy_independence,
    check_ui_direction,
    check_util_leaves,
    folder_cycles,
    heavy_imports,
    import_cycles,
)

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- the real tree


def test_runtime_never_imports_the_kit_or_the_app() -> None:
    assert check_ui_direction(ROOT) == []


def test_policy_modules_import_no_engine_or_models() -> None:
    assert check_policy_independence(ROOT) == []


def test_production_code_imports_no_test_models() -> None:
    assert check_no_test_models(ROOT) == []


def test_the_engine_imports_neither_the_agent_nor_the_kit() -> None:
    assert check_engine_independence(ROOT) == []
    assert (ROOT / "deputy_shiny" / "_engine" / "loop.py").exists()  # the rule has a subject


def test_rule_7_catches_the_engine_importing_the_agent(tree: Path) -> None:
    write(tree, {"deputy_shiny/_engine/__init__.py": "", "deputy_shiny/_engine/ok.py": ""})
    assert check_engine_independence(tree) == []
    write(tree, {"deputy_shiny/_engine/late.py": "def f():\n    from ..agent import Agent\n"})
    assert check_engine_independence(tree) == [
        "deputy_shiny._engine.late:2 imports deputy_shiny.agent"
    ]


def test_models_import_neither_the_agent_nor_the_engine() -> None:
    assert check_models_independence(ROOT) == []
    assert (ROOT / "deputy_shiny" / "models" / "_provider.py").exists()  # the wire is there


def test_the_top_level_holds_no_stray_private_modules() -> None:
    """The top level is the map's first page: what sat there only to dodge a cycle or for
    want of a home has moved into its folder (models/, tools/, sandbox/, _util/)."""
    private = sorted(p.stem for p in (ROOT / "deputy_shiny").glob("_*.py"))
    assert private == ["__init__", "_dangerous_bash", "_paths"]
    assert not (ROOT / "deputy_shiny" / "limits.py").exists()


def test_no_import_cycle_between_folders() -> None:
    assert check_folder_cycles(ROOT) == []


def test_util_imports_only_errors() -> None:
    assert check_util_leaves(ROOT) == []
    assert (ROOT / "deputy_shiny" / "_util" / "timeouts.py").exists()  # the rule has a subject


def test_no_import_cycles_lazy_and_type_checking_imports_included() -> None:
    assert check_cycles(ROOT) == []
    assert import_cycles(ROOT) == []


def test_import_deputy_shiny_loads_neither_shiny_nor_litellm() -> None:
    assert heavy_imports(ROOT) == []


# --------------------------------------------------------------------------- it can fail


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tiny package shaped like deputy_shiny that keeps every rule."""
    return write(
        tmp_path,
        {
            "deputy_shiny/__init__.py": "from .agent import Agent\n",
            "deputy_shiny/agent.py": "from .tools import tool\nclass Agent: ...\n",
            "deputy_shiny/models/__init__.py": "",
            "deputy_shiny/models/scripted.py": "class ScriptedModel: ...\n",
            "deputy_shiny/testing.py": "from .models.scripted import ScriptedModel\n",
            "deputy_shiny/tools/__init__.py": "def tool(): ...\n",
            "deputy_shiny/permissions.py": "from .tools import tool\n",
            "deputy_shiny/shiny/__init__.py": "import shiny\nfrom ..agent import Agent\n",
            "app.py": "from deputy_shiny.shiny import Agent\n",
            "components/__init__.py": "",
        },
    )


def test_rule_6_catches_a_util_module_importing_the_package(tree: Path) -> None:
    write(tree, {"deputy_shiny/_util/__init__.py": "", "deputy_shiny/errors.py": ""})
    write(tree, {"deputy_shiny/_util/ok.py": "from ..errors import X\nfrom . import ok\n"})
    assert check_util_leaves(tree) == []
    write(tree, {"deputy_shiny/_util/late.py": "def f():\n    from ..agent import Agent\n"})
    assert check_util_leaves(tree) == ["deputy_shiny._util.late:2 imports deputy_shiny.agent"]


def test_no_module_imports_the_package_root() -> None:
    assert check_no_root_imports(ROOT) == []


def test_rule_10_catches_a_lazy_import_of_the_package_root(tree: Path) -> None:
    assert check_no_root_imports(tree) == []
    write(tree, {"deputy_shiny/tools/late.py": "def f():\n    from .. import __version__\n"})
    assert check_no_root_imports(tree) == ["deputy_shiny.tools.late:2 imports deputy_shiny"]


def test_a_clean_tree_passes(tree: Path) -> None:
    assert check_util_leaves(tree) == []
    assert check_models_independence(tree) == []
    assert check_folder_cycles(tree) == []
    assert check_ui_direction(tree) == []
    assert check_policy_independence(tree) == []
    assert check_no_test_models(tree) == []
    assert check_cycles(tree) == []


@pytest.mark.parametrize(
    "source",
    [
        "import shinychat\n",
        "from shiny import ui\n",
        "def later():\n    from .shiny import Agent\n",
        "from deputy_shiny.shiny import Agent\n",
        "import components\n",
        "def later():\n    import app\n",
    ],
)
def test_rule_1_catches_the_runtime_importing_ui(tree: Path, source: str) -> None:
    write(tree, {"deputy_shiny/runtime.py": source})
    found = check_ui_direction(tree)
    assert len(found) == 1 and found[0].startswith("deputy_shiny.runtime:")


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("deputy_shiny/tools/web.py", "def native():\n    from ..models import resolve\n"),
        ("deputy_shiny/permissions.py", "from .agent import Agent\n"),
        ("deputy_shiny/hooks.py", "from . import _engine\n"),
        ("deputy_shiny/hooks_builtin.py", "from .models.scripted import ScriptedModel\n"),
        ("deputy_shiny/sandbox.py", "import deputy_shiny.agent\n"),
        # New modules inherit the rule: a new hooks_* module, a module in sandbox/.
        ("deputy_shiny/hooks_extra.py", "from .models import ChatModel\n"),
        (
            "deputy_shiny/sandbox/_new.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._engine import x\n",
        ),
    ],
)
def test_rule_2_catches_policy_importing_the_engine(tree: Path, module: str, source: str) -> None:
    write(tree, {module: source, "deputy_shiny/_engine.py": ""})
    assert len(check_policy_independence(tree)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from .testing import ScriptedModel\n",
        "def demo():\n    from deputy_shiny.models.scripted import ScriptedModel\n",
        "from .models import scripted\n",
    ],
)
def test_rule_3_catches_production_code_using_test_models(tree: Path, source: str) -> None:
    write(tree, {"deputy_shiny/demo.py": source})
    assert len(check_no_test_models(tree)) == 1
    assert check_no_test_models(tree, allowed={"deputy_shiny.demo"}) == []


def test_rule_4_catches_a_lazy_cycle_and_a_grown_one(tree: Path) -> None:
    write(
        tree,
        {
            "deputy_shiny/a.py": "from .b import x\n",
            "deputy_shiny/b.py": "x = 1\ndef later():\n    from . import a\n",
        },
    )
    cycle = frozenset({"deputy_shiny.a", "deputy_shiny.b"})
    assert import_cycles(tree) == [cycle]
    assert check_cycles(tree) == ["import cycle: deputy_shiny.a <-> deputy_shiny.b"]
    assert check_cycles(tree, known={cycle}) == []
    # A third module joins the cycle: the known one no longer matches.
    write(tree, {"deputy_shiny/c.py": "import deputy_shiny.a\n"})
    write(tree, {"deputy_shiny/b.py": "x = 1\ndef later():\n    from . import c\n"})
    assert len(check_cycles(tree, known={cycle})) == 1


def test_rule_4_counts_a_sub_package_init(tree: Path) -> None:
    # permissions -> tools.files runs tools/__init__, which imports permissions.
    write(
        tree,
        {
            "deputy_shiny/tools/__init__.py": "from ..permissions import check\n",
            "deputy_shiny/tools/files.py": "",
            "deputy_shiny/permissions.py": "from .tools.files import read\ncheck = 1\n",
        },
    )
    assert frozenset({"deputy_shiny.permissions", "deputy_shiny.tools"}) in import_cycles(tree)


def test_rule_5_catches_a_heavy_import(tmp_path: Path) -> None:
    write(tmp_path, {"fake_runtime/__init__.py": "import shiny\n"})
    assert "shiny" in heavy_imports(tmp_path, "fake_runtime")


@pytest.mark.parametrize(
    "source",
    [
        "from ..agent import Agent\n",
        "def later():\n    from deputy_shiny._engine import loop\n",
        "import typing\nif typing.TYPE_CHECKING:\n    from .._engine.deps import RunDeps\n",
    ],
)
def test_rule_8_catches_a_new_models_module_importing_the_engine_or_the_agent(
    tree: Path, source: str
) -> None:
    write(tree, {"deputy_shiny/_engine/__init__.py": "", "deputy_shiny/models/ok.py": ""})
    write(tree, {"deputy_shiny/models/_ok.py": "from ..errors import X\nfrom . import scripted\n"})
    assert check_models_independence(tree) == []
    write(tree, {"deputy_shiny/models/_wire.py": source})
    found = check_models_independence(tree)
    assert len(found) == 1 and found[0].startswith("deputy_shiny.models._wire:")


def test_rule_9_catches_a_cycle_between_folders_without_a_module_cycle(tree: Path) -> None:
    # _engine/offload -> persistence/files and persistence/approvals -> _engine/durable: no
    # module imports itself back, but the two folders depend on each other.
    write(
        tree,
        {
            "deputy_shiny/_engine/__init__.py": "",
            "deputy_shiny/_engine/offload.py": "from ..persistence.files import read\n",
            "deputy_shiny/_engine/durable.py": "class Suspension: ...\n",
            "deputy_shiny/persistence/__init__.py": "",
            "deputy_shiny/persistence/files.py": "def read(): ...\n",
        },
    )
    assert check_folder_cycles(tree) == []
    write(
        tree,
        {"deputy_shiny/persistence/approvals.py": "from .._engine.durable import Suspension\n"},
    )
    assert import_cycles(tree) == []  # the module-level check sees nothing
    assert folder_cycles(tree) == [frozenset({"deputy_shiny._engine", "deputy_shiny.persistence"})]
    assert check_folder_cycles(tree) == [
        "folder cycle: deputy_shiny._engine <-> deputy_shiny.persistence"
    ]
