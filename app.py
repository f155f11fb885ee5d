"""The reference deputy_shiny chat app (deployable to Posit Connect as is).

Run it with ``./scripts/run-app``. The model comes from ``DEPUTY_MODEL`` (any litellm
model string, with the provider's usual API key variable); without it, or without
that key, the app runs on the offline demo model ``deputy/demo`` and says so in a
banner.

Each browser session gets its own Agent, and each user a workspace folder of their own
(seeded with ``welcome.md``). The agent reads and lists files freely; writes and shell commands
ask the user first (a dialog), a hook blocks dangerous shell commands, and the user
can narrow the permission mode from the sidebar, which also shows the workspace's
files and the conversation's usage.

The agent leads a small research team: it may hand a task to a ``researcher``
subagent (read-only file tools) and a ``writer`` (no tools) with its ``delegate``
tool. The sidebar's Team panel shows the delegations live, with transcripts and a Stop
button, to this session's user only (``session.user`` when Posit Connect sets it, else
the session id). On the demo model, say *research <topic>*.

Each user's conversation is saved after every run: a page reload (or a dropped
connection) brings back the chat, the workspace and any approval still waiting. The user
is Posit Connect's signed-in user, else a token in an HttpOnly cookie (on Connect, whose
content shares one origin, anonymous visitors' conversations are not saved); they live
under ``DEPUTY_CONVERSATIONS_DIR`` (default: ``deputy_shiny/conversations`` in the
system temp dir) and are deleted after 7 days unused. With ``DEPUTY_STORE_URL`` (a
SQLAlchemy URL) the conversations are kept in that database instead, so several
processes share them, and the folder keeps only the workspaces. The sidebar's Conversation section
starts a new one, and rewinds the workspace's files to the start of any run.
``DEPUTY_BUDGET_REQUESTS_PER_DAY``, ``DEPUTY_BUDGET_TOKENS_PER_DAY`` and
``DEPUTY_BUDGET_COST_PER_DAY`` (US dollars) hold each user to a daily budget, across
their sessions and the processes sharing the store; the same names with ``ANONYMOUS_``
after ``DEPUTY_BUDGET_`` bound what all anonymous visitors spend together (unset: as
much as one user).

With ``DEPUTY_MCP_CONFIG`` naming an MCP config file (``{"mcpServers": {...}}``), the
sidebar also lists its servers: each session connects them with a click, gets their
tools, and its server processes stop when it ends.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from shiny import App, Inputs, Outputs, Session, render, ui
from starlette.requests import Request

from components.model_choice import (
    ModelCheck,
    ModelChoice,
    chosen_model,
    demo_banner,
    page_follows_check,
    track_model_choice,
)
from components.sidebar import app_sidebar, model_section_server, show_not_saved
from components.usage_meter import usage_meter_server
from components.workspace import seed_workspace, workspace_server
from deputy_shiny import (
    Permissions,
    hook_block_dangerous_bash,
    sandbox_unavailable_reason,
    tool_run_bash,
    tools_interactive,
    tools_preset,
)
from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.mcp import MCP_CONFIG_ENV, load_mcp_config
from deputy_shiny.models.demo import RESEARCHER_ROLE, WRITER_ROLE
from deputy_shiny.shiny import (
    AgentChatContext,
    AgentChatHandle,
    DailyAllowance,
    KitPersistence,
    UserBudget,
    agent_chat_server,
    agent_chat_ui,
    conversation_panel_server,
    mcp_panel_server,
    permission_mode_server,
    subagent_panel_server,
    trusted_session_user,
)

WWW = Path(__file__).parent / "www"

SYSTEM_PROMPT = """\
You are the assistant of a Shiny chat app. You work in a private workspace folder that
belongs to this browser session (it starts with welcome.md).

Tools: read, list, search, write and edit files in the workspace; run bash commands
there (in a sandbox: only the workspace, no network), when the server offers run_bash;
ask the user multiple-choice questions with ask_user when a choice is theirs; hand
self-contained research to your team with delegate (the researcher reads the files,
the writer turns notes into prose; they see nothing of this conversation but the task).
Writes and shell commands need the user's approval in a dialog, and the user may
narrow the permission mode at any time. A call that comes back "Denied: <reason>" did
not run: respect it, do not retry it unchanged, and say what you would need instead.
Dangerous shell commands are blocked.

Answer clearly and briefly, in markdown."""

# One check per process: litellm is imported (seconds) in a worker thread at start, then
# the provider's API key is checked; no session ever waits for it on the event loop.
MODEL_CHECK = ModelCheck(chosen_model()).start()

# Model-run shell commands only ever run confined. Without bubblewrap the app leaves
# bash out (and says so in the sidebar) rather than run it unconfined.
BASH_UNAVAILABLE = sandbox_unavailable_reason()

# The operator's MCP servers, if any: read (and checked) once, at start; a malformed
# file stops the app with an McpConfigError naming the server and field.
MCP_CONFIG = load_mcp_config(os.environ[MCP_CONFIG_ENV]) if os.environ.get(MCP_CONFIG_ENV) else None


def _allowance(environ: Mapping[str, str], prefix: str) -> DailyAllowance | None:
    """``{prefix}REQUESTS_PER_DAY``, ``{prefix}TOKENS_PER_DAY`` and ``{prefix}COST_PER_DAY``
    (US dollars); None when none is set."""
    requests = environ.get(f"{prefix}REQUESTS_PER_DAY", "").strip()
    tokens = environ.get(f"{prefix}TOKENS_PER_DAY", "").strip()
    cost = environ.get(f"{prefix}COST_PER_DAY", "").strip()
    if not (requests or tokens or cost):
        return None
    return DailyAllowance(
        max_requests_per_day=int(requests) if requests else None,
        max_tokens_per_day=int(tokens) if tokens else None,
        max_cost_per_day=float(cost) if cost else None,
    )


def daily_budget(environ: Mapping[str, str] = os.environ) -> UserBudget | None:
    """Each user's daily budget from ``DEPUTY_BUDGET_REQUESTS_PER_DAY``,
    ``DEPUTY_BUDGET_TOKENS_PER_DAY`` and ``DEPUTY_BUDGET_COST_PER_DAY`` (US dollars), and
    what all anonymous visitors spend together from ``DEPUTY_BUDGET_ANONYMOUS_*`` (unset:
    as much as one user); None when none is set. A malformed value stops the app as it
    starts."""
    own = _allowance(environ, "DEPUTY_BUDGET_")
    anonymous = _allowance(environ, "DEPUTY_BUDGET_ANONYMOUS_")
    if own is None and anonymous is None:
        return None
    fields = {} if own is None else own.model_dump()
    return UserBudget(**fields, anonymous=anonymous)


# Every user's conversation, kept across reloads (see the module docstring).
# With DEPUTY_STORE_URL (a SQLAlchemy URL: sqlite+aiosqlite:///... for one machine,
# postgresql+psycopg://... for several processes or hosts) the conversations' records,
# the takeover lease and the sweep live in that database, and DEPUTY_CONVERSATIONS_DIR
# keeps only the workspaces (storage every process sees).
CONVERSATIONS = KitPersistence(
    os.environ.get("DEPUTY_CONVERSATIONS_DIR")
    or Path(tempfile.gettempdir()) / "deputy_shiny" / "conversations",
    store=os.environ.get("DEPUTY_STORE_URL") or None,
    # Held across a user's sessions and every process sharing the store.
    budget=daily_budget(),
)


TEAM = (
    AgentDefinition(
        name="researcher",
        description="Looks through the workspace files (read-only) and reports what they say.",
        prompt=f"{RESEARCHER_ROLE}. Look through the workspace files with your read-only "
        "tools and report, briefly and factually, what they say about the task's topic.",
        tools=["read_file", "list_files", "grep_files"],
        permission_mode="readonly",
    ),
    AgentDefinition(
        name="writer",
        description="Turns research notes into a short, clear answer.",
        prompt=f"{WRITER_ROLE}. Turn the notes in your task into a short, clear answer.",
        tools=[],
        permission_mode="readonly",
    ),
)


def build_agent(ctx: AgentChatContext, model: str, requester: str | None = None) -> LeadAgent:
    """This session's agent: standard file tools, sandboxed bash, ask_user and a research
    team; writes need approval, and are checkpointed so they can be rewound. Only
    ``requester`` (default: the session id) may see its delegations."""
    seed_workspace(ctx.working_dir)
    bash = [] if BASH_UNAVAILABLE else [tool_run_bash()]
    return LeadAgent(
        model,
        subagents=TEAM,
        delegation_scope={"owner": requester or ctx.session_id},
        delegation_disclosure=DelegationDisclosure(
            authorize=lambda who, scope, record: who == scope["owner"]
        ),
        tools=[
            *tools_preset("standard"),
            *bash,
            *tools_interactive(callback=ctx.ask_user),
        ],
        permissions=Permissions(run_bash=True, approval_effects=("write",)),
        hooks=[hook_block_dangerous_bash()],
        system_prompt=SYSTEM_PROMPT,
        # The session's folders, ids and approvals (with persistence: the user's own).
        **ctx.agent_options(file_checkpointing=True),
    )


def _greeting(choice: ModelChoice) -> str:
    if choice.is_demo:
        return (
            "This is the **offline demo model**: scripted replies, not an LLM. Say *hi* "
            "for a tour, or try *list files*, *read welcome.md*, *write a note*, *ask me "
            "something*, *run a dangerous command* or *research tides* (a team of "
            "subagents; watch the Team panel)."
        )
    # Not naming the model: an unchecked one may still turn out to lack its API key.
    return (
        "Ask the agent to work with the files in your workspace: reading is free, writes "
        "and shell commands ask you first."
    )


def app_ui(request: Request) -> ui.Tag:
    """The page, built per request so it shows the model check's latest result: as
    outputs that follow the check while it runs, as plain markup once it has settled
    (then a session needs nothing to follow it: see ``page_follows_check``)."""
    choice = MODEL_CHECK.current()
    live = not MODEL_CHECK.settled
    banner = ui.output_ui("banner") if live else ui.div(id="banner")
    banner.children.append(demo_banner(choice))
    return ui.page_sidebar(
        app_sidebar(
            choice,
            bash_unavailable=BASH_UNAVAILABLE,
            mcp=MCP_CONFIG is not None,
            live_model=live,
        ),
        banner,
        agent_chat_ui(
            "chat",
            placeholder="Message the agent",
            greeting=_greeting(choice),
        ),
        ui.head_content(
            ui.tags.link(rel="stylesheet", href="app.css"),
            ui.tags.link(rel="icon", href="favicon.svg", type="image/svg+xml"),
            ui.tags.meta(name="color-scheme", content="light"),
        ),
        title=ui.tags.span(
            ui.tags.img(src="favicon.svg", alt="", class_="deputy-logo"),
            "deputy_shiny",
            ui.tags.small("agent chat", class_="deputy-subtitle"),
            class_="deputy-title",
        ),
        window_title="deputy_shiny",
        fillable=True,
        fillable_mobile=True,
        class_="deputy-app",
    )


def _follow_model_check(output: Outputs, handle: AgentChatHandle) -> None:
    """Keep this session's page and agent in step with the model check, until it settles."""

    def apply(choice: ModelChoice) -> bool:
        # The check finished after this session started: move the agent to the model
        # it settled on (the demo, when the key is missing), between runs only.
        agent = handle.agent
        if agent is None or agent.get_model() == choice.model:
            return True
        if agent.running:
            return False
        agent.set_model(choice.model)
        return True

    choice = track_model_choice(MODEL_CHECK, apply)

    # Not suspended while hidden: the banner's empty container is display:none (css).
    @output(suspend_when_hidden=False)
    @render.ui
    def banner() -> ui.Tag | None:
        return demo_banner(choice())

    model_section_server("model", choice)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    # Whom the Team panel's disclosure policy judges: the signed-in user on Posit
    # Connect, else this browser session (a client-sent credentials header counts only
    # where Connect sets it).
    requester = trusted_session_user(session) or session.id
    handle = agent_chat_server(
        "chat",
        lambda ctx: build_agent(ctx, MODEL_CHECK.current().model, requester),
        mcp_config=MCP_CONFIG,
        persistence=CONVERSATIONS,
    )

    if page_follows_check(MODEL_CHECK, input):
        _follow_model_check(output, handle)
    if not handle.persistent:
        show_not_saved()
    conversation_panel_server("conversation", handle)
    permission_mode_server("mode", lambda: handle.agent)
    workspace_server("workspace", handle.working_dir, handle.tool_events)
    usage_meter_server(
        "usage", handle.usage, handle.running, handle.pending_approvals, handle.budget
    )
    subagent_panel_server("team", lambda: handle.agent, requester)
    if MCP_CONFIG is not None:
        mcp_panel_server("mcp", handle)


app = App(app_ui, server, static_assets=WWW)
