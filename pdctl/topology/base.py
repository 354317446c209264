"""What every topology file section shares: strict validation, and environment values read as text."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


class Section(BaseModel):
    """Base of every file section: unknown keys are errors and values are not silently coerced.

    Strict mode keeps `tp: "4"` or `version: 0.5` from turning into something the user did not write; the
    loader turns the resulting type errors into "expected an integer, got ..." messages.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, validate_default=False)


def env_value(value: Any) -> Any:
    """Environment values are strings; YAML turns `FOO: 1` into an int, so accept scalars as their text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def env_mapping(value: Any) -> Any:
    """An environment mapping with its scalar values as text (see env_value); anything else is left to the
    model's own type check."""
    if isinstance(value, dict):
        return {k: env_value(v) for k, v in value.items()}
    return value


# An environment section (engine.env, prefill.env, router.env, engine.container.env, a profile's env): scalar
# values taken as text, as a shell would.
EnvMap = Annotated[dict[str, str], BeforeValidator(env_mapping)]
