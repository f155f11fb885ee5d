"""Agent is a façade over components that own their state (issue #20, step 5).

The shape is checked on source with ``ast`` (tests/_agent_shape.py): a public method
reads at most two of the agent's private attributes, a class Agent inherits declares
only its component, and nothing outside ``agent/_agent.py`` reads the agent's state.
Then the behaviour that wiring carries: every component refuses through the agent's one
guard, and the state each component owns is its own, per agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, ContextPolicy, UsageLimits
from deputy_shiny.errors import AgentBusyError, AgentRetainedError
from deputy_shiny.skills import skill_create
from deputy_shiny.testing import FunctionModel, ScriptedModel

from ._agent_shape import agent_state, private_reads, stub_pools, wide_facades

ROOT = Path(__file__).resolve().parent.parent

# Public methods still reading more than two of the Agent's attributes, and why. Each
# entry must still be needed (test_the_allowances_are_still_needed): remove it when the
# work named here lands.
WIDE_ALLOWED = {
    # The Agent's own model and permissions (not a component's state): switching them
    # also updates the tools (provider-native search) and, for set_model, the history.
    "Agent.set_model",
    "Agent.set_permission_mode",
}
# ChatMethods restates Agent.run/run_async (and _engine) under TYPE_CHECKING: the chat
# and stream adapters are written over them. The copy is two signatures that take the
# run keywords as Unpack[RunKeywords], and mypy holds them to Agent's real ones.
STUBS_ALLOWED = {"ChatMethods has a conditional block (TYPE_CHECKING stubs)"}


def _name(violation: str) -> str:
    return violation.split(" reads ", 1)[0]


# --------------------------------------------------------------------------- the real tree


def test_public_agent_methods_read_at_most_two_agent_attributes() -> None:
    assert [v for v in wide_facades(ROOT) if _name(v) not in WIDE_ALLOWED] == []


def test_classes_agent_inherits_declare_only_their_component() -> None:
    assert [v for v in stub_pools(ROOT) if v not in STUBS_ALLOWED] == []


def test_no_module_reads_the_agents_state() -> None:
    assert private_reads(ROOT) == []
    # The rule has a subject: the components are the agent's state.
    assert {"_approvals", "_context", "_delegator", "_checkpoints", "_mcp"} <= agent_state(ROOT)


def test_the_allowances_are_still_needed() -> None:
    assert {_name(v) for v in wide_facades(ROOT)} >= WIDE_ALLOWED
    assert set(stub_pools(ROOT)) >= STUBS_ALLOWED


# --------------------------------------------------------------------------- it can fail


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


AGENT = """
from ._parts import PartMethods, Part

class Agent(PartMethods):
    def __init__(self) -> None:
        self._conversation = []
        self._part = Part(self._conversation)

    def turns(self):
        return list(self._conversation)
"""
PARTS = """
class Part:
    def __init__(self, conversation):
        self._conversation = conversation  # its own attribute: fine

    def size(self):
        return len(self._conversation)

class PartMethods:
    _part: Part

    def size(self):
        return self._part.size()
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tiny agent/ with one component, keeping every rule."""
    return write(
        tmp_path,
        {
            "deputy_shiny/__init__.py": "",
            "deputy_shiny/agent/__init__.py": "",
            "deputy_shiny/agent/_agent.py": AGENT,
            "deputy_shiny/agent/_parts.py": PARTS,
        },
    )


def test_a_clean_tree_passes(tree: Path) -> None:
    assert agent_state(tree) == {"_conversation", "_part"}
    assert wide_facades(tree) == []
    assert stub_pools(tree) == []
    assert private_reads(tree) == []


def test_a_wide_facade_is_caught(tree: Path) -> None:
    both = "\n    def both(self):\n        return self._part, self._conversation, self._x()\n"
    wide = AGENT + both
    write(tree, {"deputy_shiny/agent/_agent.py": wide})
    assert wide_facades(tree) == ["Agent.both reads 3: _conversation, _part, _x"]


def test_a_wide_facade_in_an_inherited_class_is_caught(tree: Path) -> None:
    wide = PARTS + "\n    def more(self):\n        return self._part, self._a, self._b\n"
    write(tree, {"deputy_shiny/agent/_parts.py": wide})
    assert wide_facades(tree) == ["PartMethods.more reads 3: _a, _b, _part"]


def test_a_pool_of_stubs_is_caught(tree: Path) -> None:
    pooled = PARTS.replace(
        "    _part: Part\n",
        "    _part: Part\n    _conversation: list\n"
        "    if TYPE_CHECKING:\n        def turns(self): ...\n",
    )
    write(tree, {"deputy_shiny/agent/_parts.py": pooled})
    assert stub_pools(tree) == [
        "PartMethods declares 2 attributes: _part, _conversation",
        "PartMethods has a conditional block (TYPE_CHECKING stubs)",
    ]


def test_a_component_reading_the_agents_state_is_caught(tree: Path) -> None:
    reader = PARTS + "\ndef save(agent):\n    return agent._conversation\n"
    write(tree, {"deputy_shiny/agent/_parts.py": reader})
    write(tree, {"deputy_shiny/elsewhere.py": "def f(a):\n    return a._part\n"})
    assert private_reads(tree) == [
        "deputy_shiny/agent/_parts.py:16 reads agent._conversation",
        "deputy_shiny/elsewhere.py:2 reads a._part",
    ]


# --------------------------------------------------------------------------- behaviour


def _mutators(agent: Agent, tmp_path: Path) -> dict[str, Callable[[], Any]]:
    """One state-changing call per component (each must pass the agent's guard)."""
    session = Agent(ScriptedModel([])).add_turn("a", "b").save_session(tmp_path / "s.json")
    return {
        "approvals": lambda: agent.resume_approval_events(tmp_path / "x.json"),
        "context policy": lambda: agent.set_context_policy(ContextPolicy()),
        "compact": lambda: agent.compact(keep_last=0, summary="s"),
        "microcompact": lambda: agent.microcompact(),
        "sessions": lambda: agent.load_session(session),
        "skills": lambda: agent.load_skill(skill_create("terse", prompt="Be terse.")),
        "tools": lambda: agent.set_tools([]),
        "mcp": lambda: agent.load_mcp({"mcpServers": {}}),
        "delegation": lambda: agent.retain_agent(Agent(ScriptedModel([])), UsageLimits()),
    }


def test_every_component_refuses_while_its_agent_is_retained(tmp_path: Path) -> None:
    owner = Agent(ScriptedModel([]))
    other = Agent(ScriptedModel([]), approval_dir=None).add_turn("hi", "hello")
    handle = owner.retain_agent(other, UsageLimits(max_requests=5))
    refused: list[str] = []
    mutators = _mutators(other, tmp_path)
    for name, attempt in mutators.items():
        try:
            attempt()
        except AgentRetainedError:
            refused.append(name)
    assert refused == list(mutators)
    owner.release_agent(handle)
    assert other.compact(keep_last=0, summary="s") is not None  # free again


def test_components_refuse_while_their_agent_runs(tmp_path: Path) -> None:
    started, tried = asyncio.Event(), asyncio.Event()

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        started.set()
        await tried.wait()  # the run stays in progress until every call was tried
        return "done"

    agent = Agent(FunctionModel(answer))
    refused: list[str] = []

    async def main() -> None:
        run = asyncio.ensure_future(agent.run_async("go"))
        await started.wait()
        # From a worker thread, as a UI's other thread would (the blocking calls refuse
        # to run on the event loop itself).
        await asyncio.to_thread(attempt_all)
        tried.set()
        assert (await run).response == "done"

    def attempt_all() -> None:
        for name, attempt in _mutators(agent, tmp_path).items():
            if name in ("context policy", "tools", "delegation"):
                continue  # allowed during a run (they apply from the next run or call)
            try:
                attempt()
            except AgentBusyError:
                refused.append(name)

    asyncio.run(main())
    assert refused == ["approvals", "compact", "microcompact", "sessions", "skills", "mcp"]


def test_each_agent_owns_its_components_state(tmp_path: Path) -> None:
    policy = ContextPolicy(max_tokens=64000)
    one = Agent(ScriptedModel([]), approval_dir=tmp_path).set_context_policy(policy)
    two = Agent(ScriptedModel([]))
    one.load_skill(skill_create("terse", prompt="Be terse."))
    assert (one.approval_dir, two.approval_dir) == (tmp_path.resolve(), None)
    assert (one.context_policy.max_tokens, two.context_policy.max_tokens) == (64000, 32000)
    assert (sorted(one.skills()), sorted(two.skills())) == (["terse"], [])
    assert "Be terse." in (one.get_system_prompt() or "")
    assert two.get_system_prompt() is None


def test_components_do_not_keep_their_agent_alive(tmp_path: Path) -> None:
    """What a component reads of its agent it holds weakly: an agent (with every
    component made) is freed by reference counting alone, as before the components."""
    import gc
    import weakref

    agent = Agent(
        ScriptedModel([]),
        working_dir=tmp_path,
        approval_dir=tmp_path,
        enable_file_checkpointing=True,
        context_policy=ContextPolicy(offload_dir=tmp_path / "results"),
    )
    agent.add_turn("a", "b").add_turn("c", "d").compact(keep_last=0, summary="s")
    agent.load_skill(skill_create("terse", prompt="Be terse."))
    ref = weakref.ref(agent)
    gc.disable()
    try:
        del agent
        assert ref() is None
    finally:
        gc.enable()
