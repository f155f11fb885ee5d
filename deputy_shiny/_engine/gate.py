"""The gate every tool call passes: permissions, hooks and human approval.

:meth:`ToolGate.decide` runs the nine steps of :mod:`deputy_shiny.permissions` for
one call, yielding ``permission``, ``hook`` and ``approval`` events as it goes and
leaving the outcome in a :class:`Verdict`. After the tool ran,
:meth:`ToolGate.after_call` runs the ``PostToolUse`` / ``PostToolUseFailure`` hooks.

Errors are denials here: an exception or timeout in ``can_use_tool``, a
``PermissionRequest`` or ``PreToolUse`` hook, or the approval handler denies the call,
with a reason that says so; nothing here can crash a run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .._util.interrupt import Guard, Interrupted
from ..approvals import ApprovalDecision, ApprovalRequest, prompt_tool_decision
from ..conversation import Conversation
from ..errors import ToolArgumentsError
from ..events import ApprovalEvent, HookEvent, PermissionEvent
from ..hooks import HookContext, HookResultPostToolUse, HookResultPreToolUse, HookRun
from ..messages import ContentToolRequest, ContentToolResult
from ..permissions import (
    PermissionContext,
    PermissionDecision,
    PermissionResultAllow,
    PermissionResultDeny,
    evaluate,
    is_soft_denial,
    permission_context,
    tool_kind,
)
from ..tools import Tool, tool_context, tool_metadata
from ..usage import AgentUsage, CostSummary, UsageLimits
from .deps import RunDeps
from .durable import json_only_problem

logger = logging.getLogger(__name__)
T = TypeVar("T")

Emit = Callable[..., Any]


@dataclass
class Verdict:
    """The gate's outcome for one call."""

    allowed: bool = False
    reason: str = ""
    arguments: dict[str, Any] | None = None
    additional_context: str | None = None
    stop_reason: str | None = None  # a hook asked to end the run after this call
    # A PermissionResultDeny(interrupt=True): the run ends after this call, with this
    # message (the denial's) as the stop message.
    interrupt: str | None = None
    # ApprovalDecision.stop_run(): no call of this response runs, and the run ends.
    stop_run: str | None = None
    # Nobody can answer now but the run has a durable store: the run pauses on this call.
    suspend: ApprovalRequest | None = None
    # A person edited the model's arguments before approving: the result records them.
    edited: bool = False

    def deny(self, decision: PermissionDecision, reason: str | None = None) -> None:
        """Record a DENY (and its interrupt, if the callback asked for one)."""
        self.allowed = False
        self.reason = decision.reason if reason is None else reason
        if decision.interrupt:
            self.interrupt = decision.reason


class ToolGate:
    """Decides the tool calls of one run. Private: the engine makes one per run.

    It reads the run's :class:`~deputy_shiny._engine.deps.RunDeps` and the conversation's
    "always allow" approvals, never the Agent.
    """

    def __init__(
        self,
        deps: RunDeps,
        conversation: Conversation,
        *,
        run_id: str,
        run_context: dict[str, Any],
        emit: Emit,
        guard: Guard[Any],
        usage: Callable[[], AgentUsage] | None = None,
        limits: UsageLimits | None = None,
    ) -> None:
        self.deps = deps
        self.usage = usage  # the run's usage so far, for hook contexts
        self.limits = limits
        self.conversation = conversation
        self.run_id = run_id
        self.run_context = run_context
        self.emit = emit  # records and returns an event of this run
        self.guard = guard  # wraps an await so an interrupt lands there

    # ------------------------------------------------------------ decide

    def _permission_context(self, tool: Tool, request: ContentToolRequest) -> PermissionContext:
        """What ``can_use_tool`` learns about this call."""
        deps = self.deps
        return permission_context(
            tool,
            deps.permissions,
            deps.working_dir,
            agent_id=deps.agent_id,
            session_id=deps.session_id,
            run_id=self.run_id,
            call_id=request.id,
            run_context=self.run_context,
        )

    async def decide(
        self,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        verdict: Verdict,
        calls_after: int = 0,
    ) -> AsyncIterator[Any]:
        """Steps 2-9 for one call whose arguments already passed step 1.

        ``calls_after`` counts the calls of the same response still to be decided; an
        approval request carries it so a UI can show how many are waiting.
        """
        deps = self.deps
        working_dir = deps.working_dir
        context = self._permission_context(tool, request)
        decision = await evaluate(deps.permissions, tool, arguments, working_dir, context=context)
        decision = await self._within_ancestors(tool, arguments, decision, context)
        yield self._permission_event(request, decision)

        # Step 7: PermissionRequest hooks may lift a soft DENY or an ASK, never a hard DENY.
        if (decision.decision == "ask" or is_soft_denial(decision)) and deps.hooks.matchers(
            "PermissionRequest", request.name
        ):
            run = await deps.hooks.run(
                "PermissionRequest",
                tool_name=request.name,
                tool_input=arguments,
                context=self._hook_context(
                    "PermissionRequest",
                    tool,
                    call_id=request.id,
                    permission_reason=decision.reason,
                ),
            )
            for event in self.hook_events("PermissionRequest", run):
                yield event
            lifted = _lifted_by(run, decision)
            if lifted is not decision:
                decision = lifted
                yield self._permission_event(request, decision)

        if decision.decision == "deny":
            verdict.deny(decision)
            return
        arguments = decision.arguments if decision.arguments is not None else arguments

        # Step 8: PreToolUse hooks.
        if deps.hooks.matchers("PreToolUse", request.name):
            run = await deps.hooks.run(
                "PreToolUse",
                tool_name=request.name,
                tool_input=arguments,
                context=self._hook_context("PreToolUse", tool, call_id=request.id),
            )
            for event in self.hook_events("PreToolUse", run):
                yield event
            hook_decision, arguments, extra = await self._pre_tool_use(
                run, decision, tool, arguments, context
            )
            verdict.additional_context = extra.additional_context
            verdict.stop_reason = extra.stop_reason
            if hook_decision is not decision:
                decision = hook_decision
                yield self._permission_event(request, decision)
            if decision.decision == "deny":
                verdict.deny(decision)
                return

        # Step 9: ASK goes to a human.
        if decision.decision == "ask":
            async for event in self._ask(request, tool, arguments, decision, verdict, calls_after):
                yield event
            return
        verdict.allowed = True
        verdict.arguments = arguments

    async def _pre_tool_use(
        self,
        run: HookRun,
        decision: PermissionDecision,
        tool: Tool,
        arguments: dict[str, Any],
        context: Any,
    ) -> tuple[PermissionDecision, dict[str, Any], HookResultPreToolUse]:
        empty = HookResultPreToolUse()
        failure = run.failure
        if failure is not None:
            return (
                PermissionDecision(
                    "deny",
                    f"A PreToolUse hook failed ({failure}), so the call is denied.",
                    "pre_tool_use_hook",
                ),
                arguments,
                empty,
            )
        result = run.result
        if not isinstance(result, HookResultPreToolUse):
            return decision, arguments, empty
        if result.permission == "deny":
            reason = result.reason or "A PreToolUse hook denied the call."
            return PermissionDecision("deny", reason, "pre_tool_use_hook"), arguments, result
        if result.updated_input is not None:
            # A hook's edit is input like any other: steps 1-4 and 6 judge it again.
            rechecked = await evaluate(
                self.deps.permissions,
                tool,
                result.updated_input,
                self.deps.working_dir,
                context=context,
                callback_denies_only=decision.decision == "ask",
            )
            if rechecked.decision != "deny":
                rechecked = await self._within_ancestors(
                    tool, result.updated_input, rechecked, context
                )
            if rechecked.decision == "deny":
                return rechecked, arguments, result
            arguments = rechecked.arguments or arguments
            if decision.decision == "allow" and rechecked.decision == "ask":
                decision = rechecked
        if result.permission == "ask" and decision.decision == "allow":
            reason = result.reason or "A PreToolUse hook asks for approval."
            decision = PermissionDecision("ask", reason, "pre_tool_use_hook", arguments=arguments)
        return decision, arguments, result

    async def _within_ancestors(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        decision: PermissionDecision,
        context: PermissionContext,
    ) -> PermissionDecision:
        """A delegated run's call must also pass every agent above it, as they are now.

        An ancestor that lacks the tool or denies the call makes a hard DENY (no hook or
        approval of the subagent's lifts it); one that asks turns an ALLOW into an ASK.
        """
        if decision.decision == "deny":
            return decision
        for above in self.deps.ancestors:
            if above.tool_names is not None and tool.name not in above.tool_names():
                return PermissionDecision(
                    "deny",
                    f"The {above.name} does not have the tool {tool.name!r}, so a subagent "
                    "may not use it.",
                    "ancestor",
                    hard=True,
                )
            verdict = await evaluate(
                above.permissions(), tool, arguments, above.working_dir, context=context
            )
            if verdict.decision == "deny":
                return PermissionDecision(
                    "deny",
                    f"The {above.name}'s permissions refuse it: {verdict.reason}",
                    "ancestor",
                    hard=True,
                )
            if verdict.decision == "ask" and decision.decision == "allow":
                decision = PermissionDecision(
                    "ask",
                    f"The {above.name}'s permissions need approval: {verdict.reason}",
                    "ancestor",
                    arguments=decision.arguments,
                )
        return decision

    async def _ask(
        self,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        decision: PermissionDecision,
        verdict: Verdict,
        calls_after: int,
    ) -> AsyncIterator[Any]:
        deps = self.deps
        if tool.name in self.conversation.always_approved:
            verdict.allowed, verdict.arguments = True, arguments
            yield self._permission_event(
                request,
                PermissionDecision(
                    "allow", "Approved for the rest of the conversation.", "approval"
                ),
            )
            return
        if deps.permissions.permission_prompt_tool_name is not None:
            async for event in self._ask_prompt_tool(request, tool, arguments, decision, verdict):
                yield event
            return
        handler = deps.approval_handler
        if handler is None and deps.durable is None:
            verdict.reason = f"{decision.reason} No one can approve this call, so it is denied."
            yield self._permission_event(
                request, PermissionDecision("deny", verdict.reason, "approval")
            )
            return
        approval = self._approval_request(request, tool, arguments, decision, calls_after)
        if handler is None:
            # Step 9's durable branch: the call is saved and the run pauses on it. It will
            # run from its saved JSON, so the tool must take JSON-only arguments.
            problem = json_only_problem(arguments)
            if problem is not None:
                verdict.reason = (
                    f"{decision.reason} The call cannot wait for approval: {problem}, and a "
                    f"tool that can wait for a durable approval must take JSON-only arguments."
                )
                yield self._permission_event(
                    request, PermissionDecision("deny", verdict.reason, "approval")
                )
                return
            verdict.suspend = approval
            return
        yield self._approval_event(approval, "requested")
        try:
            answer = await self.guard(_call_handler(handler, approval))
        except Interrupted:
            raise
        except TimeoutError:
            verdict.reason = "Nobody approved the call in time, so it is denied."
            yield self._approval_event(approval, "timeout")
            return
        except Exception as exc:
            logger.warning("approval handler failed; denying the call", exc_info=True)
            verdict.reason = (
                f"The approval handler failed ({type(exc).__name__}), so the call is denied."
            )
            yield self._approval_event(approval, "denied")
            return
        async for event in self._apply(approval, request, tool, arguments, answer, verdict):
            yield event

    async def _ask_prompt_tool(
        self,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        decision: PermissionDecision,
        verdict: Verdict,
    ) -> AsyncIterator[Any]:
        """Step 9 through ``permission_prompt_tool_name``: that tool's answer decides.

        Its answer is untrusted input: only a well-formed allow approves (see
        :func:`~deputy_shiny.approvals.prompt_tool_decision`); anything else denies.
        """
        deps = self.deps
        name = deps.permissions.permission_prompt_tool_name
        prompt = deps.tools.get(name) if isinstance(name, str) else None
        if prompt is None or tool_kind(prompt) != "custom":
            why = "is not registered" if prompt is None else "is a built-in tool"
            verdict.reason = (
                f"{decision.reason} The permission prompt tool {name!r} {why}, so no one "
                "can approve this call."
            )
            yield self._permission_event(
                request, PermissionDecision("deny", verdict.reason, "approval")
            )
            return
        approval = self._approval_request(request, tool, arguments, decision, 0)
        yield self._approval_event(approval, "requested")
        question = {"tool_name": tool.name, "input": arguments, "tool_use_id": request.id}
        ask = ContentToolRequest(id=request.id, name=prompt.name, arguments=question)
        try:
            parsed = prompt.parse_arguments(question)
            context = deps.tool_context(self.run_id, self.run_context, ask)
            with tool_context(context):
                value = await self.guard(prompt.invoke(parsed))
            answer = prompt_tool_decision(value)
        except Interrupted:
            raise
        except Exception as exc:
            logger.warning("permission prompt tool failed; denying the call", exc_info=True)
            answer = f"it failed ({type(exc).__name__}: {str(exc)[:200]})"
        if isinstance(answer, str):
            verdict.reason = (
                f"The permission prompt tool {prompt.name!r} gave no valid answer: {answer}; "
                "the call is denied."
            )
            yield self._approval_event(approval, "denied")
            return
        by = f"the permission prompt tool {prompt.name!r}"
        async for event in self._apply(approval, request, tool, arguments, answer, verdict, by=by):
            yield event

    def _approval_request(
        self,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        decision: PermissionDecision,
        calls_after: int,
    ) -> ApprovalRequest:
        deps = self.deps
        return ApprovalRequest(
            call_id=request.id,
            tool_name=tool.name,
            description=tool.description,
            annotations=dict(tool_metadata(tool)["annotations"]),
            arguments=arguments,
            input_schema=tool.parameters,
            reason=decision.reason,
            agent_id=deps.agent_id,
            session_id=deps.session_id,
            run_id=self.run_id,
            calls_after=calls_after,
        )

    async def resume(
        self,
        approval: ApprovalRequest,
        request: ContentToolRequest,
        tool: Tool,
        answer: ApprovalDecision,
        verdict: Verdict,
    ) -> AsyncIterator[Any]:
        """A durable approval's decision, applied in the run that resumes it.

        An approved call passes the policy again, edited or not (steps 1-4, 6 and 8 deny
        only): the permissions may have narrowed since it was saved.
        """
        async for event in self._apply(
            approval, request, tool, approval.arguments, answer, verdict, recheck=True
        ):
            yield event

    async def _apply(
        self,
        approval: ApprovalRequest,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        answer: ApprovalDecision,
        verdict: Verdict,
        *,
        recheck: bool = False,
        by: str = "the user",
    ) -> AsyncIterator[Any]:
        """A person's answer: deny, stop the run, or run the call (edited input re-checked)."""
        if not answer.approved:
            told = f": {answer.message}" if answer.message else "."
            verdict.reason = (
                f"{by[:1].upper()}{by[1:]} stopped the run" if answer.stop else f"Denied by {by}"
            ) + told
            if answer.stop:
                verdict.stop_run = verdict.reason
            yield self._approval_event(approval, "denied")
            return
        # Input sent back unchanged is no edit (a form may always send its fields).
        verdict.edited = answer.updated_input is not None and answer.updated_input != arguments
        if answer.updated_input is not None or recheck:
            edited = answer.updated_input is not None
            given = answer.updated_input if answer.updated_input is not None else arguments
            rechecked = await self._recheck_edited(tool, given, request)
            if rechecked.decision == "deny":
                what = "The edited input was refused" if edited else "The call is now refused"
                verdict.deny(rechecked, f"{what}: {rechecked.reason}")
                yield self._approval_event(approval, "denied")
                yield self._permission_event(request, rechecked)
                return
            arguments = rechecked.arguments or given
        if answer.always:
            self.conversation.always_approved.add(tool.name)
        verdict.allowed, verdict.arguments = True, arguments
        yield self._approval_event(approval, "approved")

    async def _recheck_edited(
        self, tool: Tool, updated: dict[str, Any], request: ContentToolRequest
    ) -> PermissionDecision:
        """Edited input passes steps 1-4, 6 (deny only) and 8 (deny only) again."""
        deps = self.deps
        try:
            tool.parse_arguments(updated)
        except ToolArgumentsError as exc:
            return PermissionDecision("deny", str(exc), "arguments", hard=True)
        context = self._permission_context(tool, request)
        decision = await evaluate(
            deps.permissions,
            tool,
            updated,
            deps.working_dir,
            context=context,
            callback_denies_only=True,
        )
        if decision.decision != "deny":
            decision = await self._within_ancestors(tool, updated, decision, context)
        if decision.decision == "deny":
            return decision
        arguments = decision.arguments or updated
        if deps.hooks.matchers("PreToolUse", tool.name):
            run = await deps.hooks.run(
                "PreToolUse",
                tool_name=tool.name,
                tool_input=arguments,
                context=self._hook_context("PreToolUse", tool, call_id=request.id),
            )
            if run.failure is not None:
                return PermissionDecision(
                    "deny", f"A PreToolUse hook failed ({run.failure}).", "pre_tool_use_hook"
                )
            result = run.result
            if isinstance(result, HookResultPreToolUse) and result.permission == "deny":
                return PermissionDecision(
                    "deny",
                    result.reason or "A PreToolUse hook denied the call.",
                    "pre_tool_use_hook",
                )
        # An ASK at this point counts as approved: a person just approved this input.
        return PermissionDecision(
            "allow", "Approved with edited input.", "approval", arguments=arguments
        )

    # ------------------------------------------------------------ after the call

    async def after_call(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        result: ContentToolResult,
        failed: bool,
    ) -> tuple[ContentToolResult, list[HookRun], str | None]:
        """As in deputy: ``PostToolUse`` after every call, then ``PostToolUseFailure``
        when it failed (both with ``context.error``). Each may rewrite or withhold the
        output, add context for the model, or stop the run; returns the result, the hook
        runs and the stop message (None: go on)."""
        runs: list[HookRun] = []
        stop = None
        events = ("PostToolUse", "PostToolUseFailure") if failed else ("PostToolUse",)
        for event in events:
            if not self.deps.hooks.matchers(event, tool.name):
                continue
            run = await self.deps.hooks.run(
                event,
                tool_name=tool.name,
                tool_input=arguments,
                tool_output=None if failed else result.output,  # as deputy: the error apart
                context=self._hook_context(
                    event, tool, call_id=result.call_id, error=result.output if failed else None
                ),
            )
            runs.append(run)
            result, asked = _post_tool_use(run, result)
            stop = stop or asked
        return result, runs, stop

    # ------------------------------------------------------------ events

    def _hook_context(self, event: str, tool: Tool, **extra: Any) -> HookContext:
        """A tool event's context: it carries the tool's metadata and annotations (an MCP
        tool's server and connection id), as permission callbacks see them."""
        meta = tool_metadata(tool)
        return self.hook_context(
            event,
            tool_metadata=meta,
            tool_annotations=dict(meta["annotations"]),
            **extra,
        )

    def hook_context(self, event: str, **extra: Any) -> HookContext:
        """The context hooks receive at ``event`` in this run (extras: call_id, ...)."""
        fields = self.deps.hook_fields()
        if self.usage is not None:
            usage = self.usage()
            fields.update(usage=usage, cost=CostSummary.of(usage), usage_limits=self.limits)
        fields.update(extra)
        return HookContext(
            event=event,
            run_id=self.run_id,
            run_context=self.run_context,
            total_turns=len(self.conversation.turns),
            **fields,
        )

    def hook_events(self, event: str, run: HookRun) -> list[Any]:
        """One ``hook`` event per callback that ran."""
        return [
            self.emit(HookEvent, hook_event=event, result=record.summary())
            for record in run.records
        ]

    def _permission_event(self, request: ContentToolRequest, decision: PermissionDecision) -> Any:
        return self.emit(
            PermissionEvent,
            call_id=request.id,
            tool_name=request.name,
            decision=decision.decision,
            reason=decision.reason,
            step=decision.step,
        )

    def _approval_event(self, approval: ApprovalRequest, status: str) -> Any:
        return self.emit(
            ApprovalEvent,
            call_id=approval.call_id,
            request_id=approval.request_id,
            status=status,
        )


def _lifted_by(run: HookRun, decision: PermissionDecision) -> PermissionDecision:
    """A PermissionRequest hook's answer: an allow lifts; an error denies an ASK.

    A failing hook leaves an interrupting DENY as it is, so the run still ends with the
    callback's message.
    """
    if run.failure is not None and decision.interrupt:
        return decision
    if run.failure is not None:
        return PermissionDecision(
            "deny",
            f"A PermissionRequest hook failed ({run.failure}), so the call is denied.",
            "permission_request_hook",
        )
    if isinstance(run.result, PermissionResultAllow):
        return PermissionDecision(
            "allow",
            run.result.message or "A PermissionRequest hook allowed the call.",
            "permission_request_hook",
            arguments=decision.arguments,
        )
    if isinstance(run.result, PermissionResultDeny):
        # As deputy: a deny replaces the reason (of a DENY, or an ASK it turns into one);
        # an interrupt already asked for stays.
        return PermissionDecision(
            "deny",
            run.result.message,
            "permission_request_hook",
            interrupt=decision.interrupt or run.result.interrupt,
        )
    return decision


async def _call_handler(handler: Any, approval: ApprovalRequest) -> ApprovalDecision:
    answer = handler(approval)
    if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
        answer = await answer
    if not isinstance(answer, ApprovalDecision):
        raise TypeError(f"approval_handler returned {type(answer).__name__}, not ApprovalDecision")
    return answer


def _post_tool_use(run: HookRun, result: ContentToolResult) -> tuple[ContentToolResult, str | None]:
    """What a PostToolUse / PostToolUseFailure hook's result does to the call's result."""
    hook_result = run.result
    if not isinstance(hook_result, HookResultPostToolUse):
        return result, None
    output = result.output
    if hook_result.updated_tool_output is not None:
        output = str(hook_result.updated_tool_output)
    if hook_result.suppress_output:
        output = "[The tool's output was withheld by a hook.]"
    if hook_result.additional_context:
        output = f"{output}\n\n{hook_result.additional_context}"
    stop = None
    if not hook_result.continue_:
        stop = hook_result.stop_reason or f"A {run.event} hook asked to stop the run."
    if output != result.output:
        result = result.model_copy(update={"output": output})
    return result, stop


__all__ = ["ToolGate", "Verdict"]
