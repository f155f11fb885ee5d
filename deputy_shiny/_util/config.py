"""Base class for frozen configuration values that fail with our typed errors.

pydantic raises ``ValidationError`` for bad input; users of deputy_shiny should be able
to catch one :class:`~deputy_shiny.errors.DeputyError` hierarchy instead. Subclasses
name the error class to raise in ``_config_error``.

Every model of the package says ``defer_build=True``: its validator is built on first
use, not at import (building them all at import took most of ``import deputy_shiny``).
:func:`complete_deferred_models` builds the ones imported so far, for an app's warm-up.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, PydanticUserError, ValidationError

from ..errors import ConfigurationError


class FrozenConfig(BaseModel):
    """A frozen, strict-keyed pydantic model whose validation errors are DeputyErrors."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    _config_error: ClassVar[type[ConfigurationError]] = ConfigurationError

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise self._config_error(describe_validation_error(type(self).__name__, exc)) from None


def describe_validation_error(owner: str, exc: ValidationError) -> str:
    """One readable line per problem, naming the field (never echoing secret-looking input)."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "value"
        problems.append(f"{where}: {err['msg']}")
    return f"Invalid {owner}: " + "; ".join(problems)


def complete_deferred_models(package: str = "deputy_shiny") -> int:
    """Build the validators of ``package``'s imported models not built yet; returns how many built.

    Warm-up work (a worker thread as the app starts), so no user's first run pays for
    them; a model still builds itself on first use if this never runs. pydantic
    serializes concurrent builds of a model (one global rebuild lock).

    A model that cannot be built is skipped: the warm-up is not the place to fail.
    pydantic keeps a model class whose creation raised (say a tool's arguments model
    for a parameter typed ``socket.socket``, refused with ``InvalidToolError``) among
    ``BaseModel``'s subclasses until the collector frees it, so such a class may still
    be listed here; if anything uses it, it raises there.

    Examples:
        >>> from deputy_shiny._util.config import complete_deferred_models
        >>> complete_deferred_models() >= 0 and complete_deferred_models() == 0
        True
    """
    pending: list[type[BaseModel]] = []
    seen: set[type[BaseModel]] = set()
    stack = list(BaseModel.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        in_package = cls.__module__ == package or cls.__module__.startswith(package + ".")
        if in_package and not cls.__pydantic_complete__:
            pending.append(cls)
    built = 0
    for cls in pending:
        try:
            cls.model_rebuild(raise_errors=False)
        except PydanticUserError:
            continue
        built += 1
    return built
