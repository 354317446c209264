"""Validation errors a user reads: pydantic's errors over a YAML document -> 'file:line:col: key.path: message'
lines with what was expected and, for misspelt keys or values, what was probably meant (did-you-mean).

Shared by the topology loader and the cluster profile (pdctl.topology.profile): both are YAML files validated
by pydantic models, located by pdctl.topology.yamltree's positions.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from pdctl.errors import UserError
from pdctl.topology.model import SERVER_KEYS, RoleSpec, TopologyFile
from pdctl.topology.yamltree import PathKey, Positions, format_path, located

MAX_ERRORS = 20
# Names a Slurm user (or an srtctl user) may reach for, and the key that means it here.
SLURM_KEY_HINTS = {
    "time": "Slurm's --time is time_limit here", "nodes": "the job asks for as many nodes as nodes: lists",
    "nodelist": "give nodes[].host the Slurm node names (or leave host out to take the job's nodes)",
    "gpus": "gpus_per_node (or gres)", "gpus-per-node": "gpus_per_node", "directives": "sbatch_directives",
    "sbatch": "sbatch_directives", "srun": "srun_options", "setup_script": "setup (shell lines)",
    "container": "the container is engine.container", "container_image": "the container is engine.container",
}
# Keys that exist on roles but not under server: (a common slip: `server: {tp: 4}`).
_ROLE_ONLY_KEYS = frozenset(RoleSpec.model_fields) - frozenset(SERVER_KEYS)

_TYPE_WORDS = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "a string", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping", "list_type": "a list",
}


def describe(value: Any) -> str:
    """How a YAML value reads to a user: "the string '4'", "the integer 4", "a list", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"the {type(value).__name__} {value}"  # e.g. YAML dates: `version: 2024-01-01`


def did_you_mean(word: Any, options: typing.Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest option, or ''."""
    by_lower = {str(o).lower(): str(o) for o in options}
    match = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[match[0]]!r}?" if match and by_lower[match[0]] != word else ""


def _unwrap(annotation: Any) -> Any:
    """Strip Optional[...] to the one non-None type."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return args[0] if len(args) == 1 else annotation
    return annotation


def model_at(path: PathKey, root: type[BaseModel] = TopologyFile) -> type[BaseModel] | None:
    """The pydantic model class that validates the mapping at `path` of a topology file (or of another file
    ROOT validates: the cluster profile), if any."""
    current: Any = root
    for part in path:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = _unwrap(field.annotation)
        elif typing.get_origin(current) is list and isinstance(part, int):
            current = _unwrap(typing.get_args(current)[0])
        else:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _error_line(err: dict[str, Any], source: str, positions: Positions,
                root: type[BaseModel] = TopologyFile) -> tuple[tuple[int, int], str]:
    """One pydantic error -> (sort position, 'file:line:col: path: message')."""
    loc: PathKey = tuple(err["loc"])
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "missing":
        parent, key = loc[:-1], loc[-1]
        pos = positions.value_at(parent)
        where = format_path(parent)
        return (pos or (0, 0)), located(source, pos, loc, f"required key {key!r} missing in {where}")
    elif kind == "extra_forbidden":
        parent, key = loc[:-1], loc[-1]
        pos = positions.key_at(loc)
        model = model_at(parent, root)
        allowed = list(model.model_fields) if model else []
        hint = did_you_mean(key, allowed) or (f"; expected one of: {', '.join(allowed)}" if allowed else "")
        if parent == ("server",) and key in _ROLE_ONLY_KEYS:
            hint = f"; {key} is a role key: set it under prefill: and/or decode: (colocated: in mode colocated)"
        elif parent == ("slurm",) and key in SLURM_KEY_HINTS:
            hint = f"; {SLURM_KEY_HINTS[key]}"
        elif parent == ("colocated",) and key in RoleSpec.model_fields:
            hint = (f"; {key} is a PD decode key (--disaggregation-decode-enable-radix-cache): a colocated "
                    "server has no disaggregation flags")
        return (pos or (0, 0)), located(source, pos, loc, f"unknown key {key!r}{hint}")
    elif len(loc) >= 2 and loc[-1] == "[key]" and not isinstance(value, str):
        # pydantic's marker for a bad mapping key (only reachable via build_topology: YAML keys are text);
        # a user key literally named "[key]" has a string input and takes the normal path.
        loc = loc[:-1]
        pos = positions.key_at(loc)
        msg = f"expected a string key, got {describe(value)}"
    else:
        pos = positions.value_at(loc)
        msg = _message(kind, value, ctx, err.get("msg", ""))
    return (pos or (0, 0)), located(source, pos, loc, msg)


def _message(kind: str, value: Any, ctx: dict[str, Any], fallback: str) -> str:
    got = describe(value)
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace(" or ", ", ")
        options = [o.strip().strip("'") for o in expected.split(",")]
        options = [o for o in options if o]
        return f"expected one of {' | '.join(options)}, got {got}{did_you_mean(value, options)}"
    if kind in _TYPE_WORDS:
        hint = ""
        if kind == "string_type" and value is not None and not isinstance(value, (dict, list)):
            hint = " (quote it)" if isinstance(value, bool) else f' (quote it: "{value}")'
        return f"expected {_TYPE_WORDS[kind]}, got {got}{hint}"
    bounds = {
        "greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"), "less_than": ("<", "lt"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"expected a value {op} {ctx.get(key)}, got {got}"
    if kind == "string_pattern_mismatch":
        return f"expected a name matching {ctx.get('pattern')}, got {got}"
    if kind == "string_too_short":
        return "expected a non-empty string"
    if kind == "string_too_long":
        return f"expected at most {ctx.get('max_length')} characters, got {len(value) if isinstance(value, str) else got}"
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length', 1)} item(s), got none"
    if kind == "finite_number":
        return f"expected a finite number, got {got}"
    if kind == "value_error":
        return str(ctx.get("error", fallback)).removeprefix("Value error, ")
    return f"{fallback}, got {got}"


Located = tuple[tuple[int, int], str]


def validation_lines(exc: ValidationError, source: str, positions: Positions,
                      root: type[BaseModel] = TopologyFile) -> list[Located]:
    return [_error_line(err, source, positions, root) for err in exc.errors()]


def sorted_failure(lines: list[Located]) -> UserError:
    ordered = sorted(lines, key=lambda t: t[0])
    return failure(list(dict.fromkeys(line for _, line in ordered)))


def failure(lines: list[str]) -> UserError:
    extra = len(lines) - MAX_ERRORS
    shown = lines[:MAX_ERRORS] + ([f"... and {extra} more error(s)"] if extra > 0 else [])
    return UserError("\n".join(shown))
