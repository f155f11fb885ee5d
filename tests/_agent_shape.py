"""The shape of ``Agent`` (issue #20, "components, not partial classes"), checked with ``ast``.

``Agent`` is a façade over components that own their state. Three rules, each a
function returning readable violations (empty: fine), so a test can run them on the
real tree and on a synthetic one made to break each rule:

- :func:`wide_facades`: a public method of ``Agent`` (or of a class it inherits from
  ``agent/``) reads at most two of the agent's own private attributes (``self._x``);
- :func:`stub_pools`: a class ``Agent`` inherits from ``agent/`` declares at most one
  attribute (its component) and no ``TYPE_CHECKING`` stubs restating the Agent;
- :func:`private_reads`: no module but ``agent/_agent.py`` reads the state ``Agent.__init__``
  sets (``agent._conversation``, ``lead._approval_handler``...) on another object.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

AGENT_DIR = Path("deputy_shiny") / "agent"
AGENT_MODULE = AGENT_DIR / "_agent.py"
# clone() rebuilds every part the constructor made, so it reads them all: it is the
# Agent's own method, kept in a module of its own only for _agent.py's size.
CLONE_MODULE = AGENT_DIR / "_clone.py"
MAX_READS = 2


@dataclass(frozen=True)
class _Class:
    node: ast.ClassDef
    path: Path


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _classes(root: Path) -> dict[str, _Class]:
    """Every class defined under ``agent/`` by name (names are unique there)."""
    found: dict[str, _Class] = {}
    for path in sorted((root / AGENT_DIR).rglob("*.py")):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ClassDef):
                found[node.name] = _Class(node, path)
    return found


def _agent_and_bases(root: Path) -> list[_Class]:
    """``Agent`` and the classes under ``agent/`` it inherits from, nearest first."""
    classes = _classes(root)
    order: list[_Class] = []
    pending = ["Agent"]
    while pending:
        name = pending.pop(0)
        if name not in classes or any(c.node.name == name for c in order):
            continue
        cls = classes[name]
        order.append(cls)
        pending.extend(b.id for b in cls.node.bases if isinstance(b, ast.Name))
    return order


def _self_reads(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The private attributes ``function`` reads on ``self`` (methods called included)."""
    return {
        node.attr
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    }


def wide_facades(root: Path) -> list[str]:
    """Public methods of Agent that read more than two of its private attributes."""
    problems: list[str] = []
    for cls in _agent_and_bases(root):
        for item in cls.node.body:
            if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if item.name.startswith("_"):
                continue
            reads = _self_reads(item)
            if len(reads) > MAX_READS:
                problems.append(
                    f"{cls.node.name}.{item.name} reads {len(reads)}: {', '.join(sorted(reads))}"
                )
    return problems


def stub_pools(root: Path) -> list[str]:
    """Classes Agent inherits from agent/ that restate the Agent's state or interface."""
    problems: list[str] = []
    for cls in _agent_and_bases(root)[1:]:
        declared = [
            item.target.id
            for item in cls.node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        ]
        if len(declared) > 1:
            problems.append(
                f"{cls.node.name} declares {len(declared)} attributes: {', '.join(declared)}"
            )
        if any(isinstance(item, ast.If) for item in cls.node.body):
            problems.append(f"{cls.node.name} has a conditional block (TYPE_CHECKING stubs)")
    return problems


def agent_state(root: Path) -> set[str]:
    """The private attributes ``Agent.__init__`` sets on ``self``."""
    agent = _classes(root)["Agent"].node
    init = next(
        item for item in agent.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"
    )
    names: set[str] = set()
    for node in ast.walk(init):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and target.attr.startswith("_")
            ):
                names.add(target.attr)
    return names


def private_reads(root: Path) -> list[str]:
    """Reads of the Agent's state on anything but ``self`` outside ``agent/_agent.py``."""
    state = agent_state(root)
    problems: list[str] = []
    for path in sorted((root / "deputy_shiny").rglob("*.py")):
        if path in (root / AGENT_MODULE, root / CLONE_MODULE) or "__pycache__" in path.parts:
            continue
        for node in ast.walk(_parse(path)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in state
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                where = path.relative_to(root)
                problems.append(f"{where}:{node.lineno} reads {ast.unparse(node)}")
    return problems
