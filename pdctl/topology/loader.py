"""Load a topology file: YAML -> validated `Topology`, every error naming file:line:col and the key path.

Errors are collected (up to MAX_ERRORS) so a user fixes a file in one pass, and each says what was expected
and, for misspelt keys or values, what was probably meant. Everything here raises `UserError` (exit 2).
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pdctl.errors import UserError
from pdctl.topology.model import SERVER_KEYS, RoleSpec, Topology, TopologyFile
from pdctl.topology.sections import MODE_SECTIONS
from pdctl.topology.yamltree import (
    MAX_FILE_BYTES,
    PathKey,
    Positions,
    format_path,
    located,
    parse_yaml,
    too_big,
)

MAX_ERRORS = 20
# Names a Slurm user (or an srtctl user) may reach for, and the key that means it here.
SLURM_KEY_HINTS = {
    "time": "Slurm's --time is time_limit here", "nodes": "the job asks for as many nodes as nodes: lists",
    "nodelist": "give nodes[].host the Slurm node names (or leave host out to take the job's nodes)",
    "gpus": "gpus_per_node (or gres)", "gpus-per-node": "gpus_per_node", "directives": "sbatch_directives",
    "sbatch": "sbatch_directives", "srun": "srun_options", "setup_script": "setup (shell lines)",
    "container": "the container is engine.container", "container_image": "the container is engine.container",
}
# Plain scalars kept as written: YAML 1.1 reads an unquoted 4:00:00 as the integer 14400 (base 60).
TEXT_PATHS: frozenset[PathKey] = frozenset({("slurm", "time_limit")})
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


def model_at(path: PathKey) -> type[BaseModel] | None:
    """The pydantic model class that validates the mapping at `path` of a topology file, if any."""
    current: Any = TopologyFile
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


def _error_line(err: dict[str, Any], source: str, positions: Positions) -> tuple[tuple[int, int], str]:
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
        model = model_at(parent)
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


def _validation_lines(exc: ValidationError, source: str, positions: Positions) -> list[Located]:
    return [_error_line(err, source, positions) for err in exc.errors()]


def _sorted_failure(lines: list[Located]) -> UserError:
    ordered = sorted(lines, key=lambda t: t[0])
    return _failure(list(dict.fromkeys(line for _, line in ordered)))


def _mode_problems(data: dict[Any, Any], source: str, positions: Positions) -> list[Located]:
    """The role sections must be the mode's: prefill: + decode: (pd), or colocated: alone (colocated).

    Checked on the data as written (key presence, so `prefill: null` counts as written) because whether a
    section is required or forbidden depends on another key, which pydantic's per-field errors cannot say.
    An unknown `mode` value is pydantic's error; then nothing is checked here.
    """
    mode = data.get("mode", "pd")
    if not isinstance(mode, str) or mode not in MODE_SECTIONS:
        return []
    out: list[Located] = []
    wanted = MODE_SECTIONS[mode]
    mode_words = "mode: colocated" if mode == "colocated" else (
        "mode: pd" + ("" if "mode" in data else ", the default"))
    for section in wanted:
        if section not in data:
            if mode == "pd":  # the message of any other missing required key
                pos = positions.value_at(())
                msg = f"required key {section!r} missing in (top level)"
            else:
                pos = positions.value_at(("mode",))
                msg = f"required key {section!r} missing ({mode_words} describes its servers in a {section}: section)"
            out.append((pos or (0, 0), located(source, pos, (section,), msg)))
        elif data[section] is None:
            pos = positions.value_at((section,))
            out.append((pos or (0, 0), located(source, pos, (section,), "expected a mapping, got null")))
    others = [s for m, sections in MODE_SECTIONS.items() if m != mode for s in sections]
    for section in others:
        if section not in data:
            continue
        pos = positions.key_at((section,))
        if mode == "colocated":
            msg = ("not allowed with mode: colocated (one colocated: section describes the servers); "
                   "remove prefill: / decode:, or set mode: pd")
        else:
            msg = (f"only allowed with mode: colocated (this file is {mode_words}); set mode: colocated and "
                   "remove prefill: / decode:, or remove colocated:")
        out.append((pos or (0, 0), located(source, pos, (section,), msg)))
    return out


def _failure(lines: list[str]) -> UserError:
    extra = len(lines) - MAX_ERRORS
    shown = lines[:MAX_ERRORS] + ([f"... and {extra} more error(s)"] if extra > 0 else [])
    return UserError("\n".join(shown))


def _cross_reference(raw: TopologyFile, source: str, positions: Positions) -> list[str]:
    """Checks across sections that make a file invalid input (not compatibility findings)."""
    problems: list[str] = []

    def add(path: PathKey, message: str, key: bool = False) -> None:
        pos = positions.key_at(path) if key else positions.value_at(path)
        problems.append(located(source, pos, path, message))

    names: dict[str, int] = {}
    for i, node in enumerate(raw.nodes):
        if node.name in names:
            add(("nodes", i, "name"), f"duplicate node name {node.name!r} (also nodes[{names[node.name]}])")
        else:
            names[node.name] = i
    for role_name in MODE_SECTIONS[raw.mode]:
        role = getattr(raw, role_name)
        seen: set[str] = set()
        for k, node_name in enumerate(role.nodes):
            if node_name not in names:
                add((role_name, "nodes", k), f"unknown node {node_name!r}{did_you_mean(node_name, names)}"
                    f" (nodes: {', '.join(names)})")
            elif node_name in seen:
                add((role_name, "nodes", k), f"node {node_name!r} listed twice")
            seen.add(node_name)
        if role.enable_dp_attention and role.tp % role.dp != 0:
            add((role_name, "dp"),
                f"dp ({role.dp}) must divide tp ({role.tp}) when enable_dp_attention is true")
        if role.port + role.replicas - 1 > 65535:
            add((role_name, "port"), f"ports {role.port}..{role.port + role.replicas - 1} of "
                f"{role.replicas} replicas exceed 65535")
    last_bootstrap = raw.transfer.bootstrap_port + (raw.prefill.replicas - 1 if raw.prefill else 0)
    if raw.prefill is not None and last_bootstrap > 65535:
        add(("transfer", "bootstrap_port"), f"bootstrap ports up to {last_bootstrap} "
            f"({raw.prefill.replicas} prefill replicas) exceed 65535")
    problems += _host_problems(raw, add)
    if raw.slurm is not None and raw.slurm.gres is not None and raw.slurm.gpus_per_node is not None:
        add(("slurm", "gpus_per_node"), "set gres or gpus_per_node, not both (both ask Slurm for GPUs)", key=True)
    if raw.router.node is not None and raw.router.node not in names:
        add(("router", "node"), f"unknown node {raw.router.node!r}{did_you_mean(raw.router.node, names)}"
            f" (nodes: {', '.join(names)})")
    return problems


def _host_problems(raw: TopologyFile, add: Any) -> list[str]:
    """A node may leave host out only with a slurm: section (the job assigns it a node), and then has no ssh:
    and no advertise_host (the address is read on the node it is given). Reports through ADD; returns []."""
    for i, node in enumerate(raw.nodes):
        if node.host is not None:
            continue
        if raw.slurm is None:
            add(("nodes", i), "required key 'host' missing (only with a slurm: section may a node leave host out: "
                "the Slurm job then assigns it one of its nodes)")
        elif node.ssh is not None:
            add(("nodes", i, "ssh"), "a node without host (assigned by Slurm) is reached through srun, not ssh",
                key=True)
        elif node.advertise_host is not None:
            add(("nodes", i, "advertise_host"), "a node without host (assigned by Slurm) advertises the address "
                "read on the node it is given (slurm.network_interface chooses the interface)", key=True)
    return []


def build_topology(data: Any, source: str = "<data>", positions: Positions | None = None,
                   source_path: Path | None = None, overrides: tuple[str, ...] | list[str] = ()) -> Topology:
    """Validate already-parsed data (e.g. a dict built by a test) into a Topology; UserError on bad input.
    OVERRIDES: `--set KEY=VALUE` applied to DATA first (pdctl.topology.overrides); their errors name them."""
    positions = positions or Positions()
    if overrides:
        from pdctl.topology.overrides import apply_overrides

        data = apply_overrides(data, overrides, positions)
    if not isinstance(data, dict):
        pos = positions.value_at(())
        raise UserError(located(source, pos, None, f"expected a mapping at the top level "
                                                   f"(name:, model:, nodes:, ...), got {describe(data)}"))
    problems_found = _mode_problems(data, source, positions)
    try:
        raw = TopologyFile.model_validate(data)
    except ValidationError as exc:
        raise _sorted_failure(_validation_lines(exc, source, positions) + problems_found) from None
    if problems_found:
        raise _sorted_failure(problems_found)
    problems = _cross_reference(raw, source, positions)
    if problems:
        raise _failure(problems)
    return Topology.from_file_model(raw, source_path=source_path, overrides=tuple(overrides),
                                    document=data if overrides else None)


def load_topology_text(text: str, source: str = "<string>") -> Topology:
    """Load a topology from YAML text; `source` names it in error messages."""
    data, positions = parse_yaml(text, source, text_paths=TEXT_PATHS)
    return build_topology(data, source, positions)


def load_topology(path: str | Path, overrides: tuple[str, ...] | list[str] = ()) -> Topology:
    """Load and validate a topology file; raises UserError('file:line:col: key.path: expected ...').
    OVERRIDES: `--set KEY=VALUE` entries applied before validation (errors: '--set KEY=VALUE: key.path: ...')."""
    path = Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES and path.is_file():  # before reading it: a huge file must not be read at all
            raise too_big(source, size)
        with path.open("rb") as fh:  # bounded also for pipes and /dev/stdin, whose size stat cannot tell
            raw_bytes = fh.read(MAX_FILE_BYTES + 1)
        if len(raw_bytes) > MAX_FILE_BYTES:
            raise too_big(source, len(raw_bytes))
    except FileNotFoundError:
        raise UserError(f"{source}: no such topology file") from None
    except IsADirectoryError:
        raise UserError(f"{source}: is a directory, expected a topology YAML file") from None
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: not UTF-8 text (byte {exc.start}); expected a YAML file") from None
    data, positions = parse_yaml(text, source, text_paths=TEXT_PATHS)
    return build_topology(data, source, positions, source_path=path.resolve(), overrides=overrides)


__all__ = ["build_topology", "describe", "did_you_mean", "format_path", "load_topology", "load_topology_text",
           "model_at"]
