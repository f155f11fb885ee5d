"""Every exception class lives in deputy_shiny/errors.py; the top level keeps the family roots."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import deputy_shiny
from deputy_shiny import errors

PACKAGE = Path(deputy_shiny.__file__).resolve().parent

# Raised and caught inside the library only; never reach an app.
INTERNAL = {"Interrupted", "AddressRefused", "PromptClosed", "ProviderFailed", "StrictYamlError"}
# ProviderFailure is a scripted *reply* (what a test model answers with), not an error
# deputy_shiny raises, so it lives with the other reply values.
DEFINED_ELSEWHERE_FOR_NOW = {"models/_replies.py": {"ProviderFailure"}}


def _exception_classes() -> list[type[BaseException]]:
    return [
        value
        for value in vars(errors).values()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    ]


# The exceptions the top level keeps: the root, and the family bases an app catches.
# Every other exception is reachable only as deputy_shiny.errors.<Name>.
TOP_LEVEL_ROOTS = {
    "DeputyError",
    "ConfigurationError",
    "ProviderError",
    "UsageLimitExceeded",
    "StructuredOutputError",
    "AgentRunError",
    "ToolInvocationError",
    "SandboxUnavailableError",
    "ApprovalResumeError",
    "McpError",
    "DelegationError",
    "PersistenceError",
    "CheckpointError",
    "CompactionError",
}


def test_every_public_exception_is_in_errors_and_documented() -> None:
    classes = _exception_classes()
    assert len(classes) >= 25
    family_map = errors.__doc__ or ""
    public = set()
    for cls in classes:
        assert cls.__doc__ and len(cls.__doc__.strip()) > 20, cls
        if cls.__name__ in INTERNAL:
            assert cls.__name__ not in errors.__all__
            assert cls.__name__ not in deputy_shiny.__all__
            continue
        public.add(cls.__name__)
        assert issubclass(cls, errors.DeputyError)
        assert cls.__name__ in errors.__all__
        # The module docstring lists every family member under its root.
        assert f"``{cls.__name__}``" in family_map, cls
    assert set(errors.__all__) == public


def test_only_the_family_roots_are_at_the_top_level() -> None:
    top_level = {
        name
        for name in deputy_shiny.__all__
        if inspect.isclass(getattr(deputy_shiny, name))
        and issubclass(getattr(deputy_shiny, name), BaseException)
    }
    assert top_level == TOP_LEVEL_ROOTS
    for name in TOP_LEVEL_ROOTS:
        assert getattr(deputy_shiny, name) is getattr(errors, name)
    for cls in _exception_classes():
        if cls.__name__ not in TOP_LEVEL_ROOTS:
            # Not re-exported, and no lazy __getattr__ hands it out either.
            assert not hasattr(deputy_shiny, cls.__name__), cls


def test_every_exception_below_a_root_is_caught_by_it() -> None:
    """Each family member is a subclass of a top-level root, so catching roots suffices."""
    roots = tuple(getattr(errors, name) for name in TOP_LEVEL_ROOTS - {"DeputyError"})
    standalone = {
        "AgentBusyError",
        "SyncInAsyncError",
        "PathDenied",
        "ToolArgumentsError",
        "ToolRejectedError",
        "AskUserDeclined",
        "ToolResultReferenceError",
        "ScriptedModelExhausted",
        # deputy's hook error: a run never raises it; an app running hooks itself may.
        "HookExecutionError",
        # The chat's refusal of an upload: told to the user, never an app's to catch.
        "AttachmentRefused",
        "AttachmentsRefused",
    }
    for cls in _exception_classes():
        if cls.__name__ in INTERNAL | standalone | {"DeputyError"}:
            continue
        assert issubclass(cls, roots), cls


def test_no_public_exception_class_is_defined_outside_errors() -> None:
    found: list[str] = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
            if bases & {"Exception", "BaseException", *dir(errors)}:
                if node.name in DEFINED_ELSEWHERE_FOR_NOW.get(relative, set()):
                    continue
                found.append(f"{relative}: {node.name}")
    assert found == []


def test_old_homes_still_name_the_same_classes() -> None:
    from deputy_shiny import _paths, hooks, permissions, skills
    from deputy_shiny._util import interrupt as _interrupt
    from deputy_shiny.tools import _net_guard, interactive

    assert permissions.PermissionsError is errors.PermissionsError
    assert hooks.InvalidHookError is errors.InvalidHookError
    assert skills.SkillError is errors.SkillError
    assert skills.SkillLoadError is errors.SkillLoadError
    assert _paths.PathDenied is errors.PathDenied
    assert interactive.AskUserDeclined is errors.AskUserDeclined
    assert _interrupt.Interrupted is errors.Interrupted
    assert _net_guard.AddressRefused is errors.AddressRefused
    assert not hasattr(deputy_shiny, "tool_reject")
