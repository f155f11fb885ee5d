"""Base class for frozen configuration values that fail with our typed errors.

pydantic raises ``ValidationError`` for bad input; users of deputy_shiny should be able
to catch one :class:`~deputy_shiny.errors.DeputyError` hierarchy instead. Subclasses
name the error class to raise in ``_config_error``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigurationError


class FrozenConfig(BaseModel):
    """A frozen, strict-keyed pydantic model whose validation errors are DeputyErrors."""

    model_config = ConfigDict(frozen=True, extra="forbid")
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
