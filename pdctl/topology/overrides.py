"""`--set KEY=VALUE`: change a topology on the command line without editing its file.

KEY is a dotted path into the YAML document (`prefill.tp`, `server.args.max-running-requests`,
`nodes[1].host` or `nodes.1.host`); VALUE is read as a YAML scalar, so `4` is an integer, `true` a boolean,
`null` removes nothing but sets null, `'4'` stays text, and `[a, b]` / `{k: v}` give a list or a mapping. The
overrides are applied to the parsed document BEFORE validation, so a bad value or an unknown key gets the
same message as in the file (with did-you-mean), located at the `--set` that wrote it instead of a file line:
`--set prefill.tpp=2: prefill.tpp: unknown key 'tpp'; did you mean 'tp'?`.

Why the raw document and not the validated model: every rule of the file (defaults merged from server:,
cross-references, mode sections) then holds for overrides too, with no second implementation. The Slurm
sweep (one job per variant) reuses `apply_overrides` for its variants.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from pdctl.errors import UserError
from pdctl.topology.yamltree import PathKey, Positions, format_path

_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[\d+\])+)$")


class OverrideMark(tuple):
    """The 'position' of a value given by `--set`: a (line, col) tuple that sorts before the file's lines
    (so the loader's ordering code is unchanged), carrying the option text errors are located at."""

    label: str

    def __new__(cls, index: int, label: str) -> OverrideMark:  # noqa: PYI034 - a tuple subclass
        mark = super().__new__(cls, (0, index))
        mark.label = label
        return mark


@dataclass(frozen=True)
class Override:
    """One parsed `--set KEY=VALUE`."""

    text: str  # as given, for messages
    path: PathKey
    value: Any


def parse_key(key: str, text: str) -> PathKey:
    """'nodes[1].host' / 'nodes.1.host' -> ('nodes', 1, 'host'); UserError (exit 2) on an empty part."""
    path: list[str | int] = []
    for part in key.split("."):
        match = _INDEX.match(part)
        if match:  # name[1][2]
            if match.group("key"):
                path.append(match.group("key"))
            path += [int(i) for i in re.findall(r"\[(\d+)\]", part)]
        elif part.isdigit() and path:
            path.append(int(part))
        elif part and "[" not in part and "]" not in part:
            path.append(part)
        else:
            raise UserError(f"--set {text}: bad key {key!r}: expected dotted names like prefill.tp or "
                            "nodes[0].host")
    return tuple(path)


def parse_override(text: str) -> Override:
    """'prefill.tp=2' -> Override; VALUE is a YAML scalar (or flow list / mapping)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set {text}: expected KEY=VALUE (e.g. --set prefill.tp=2)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"--set {text}: the value is not valid YAML: {problem}") from None
    return Override(text, parse_key(key.strip(), text), value)


def _describe(path: PathKey) -> str:
    return format_path(path)


def _assign(data: Any, override: Override, label: str = "--set") -> None:
    """Set OVERRIDE's value in DATA, creating missing mappings on the way; lists must have the index."""
    node = data
    path = override.path
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        where = _describe(path[:depth]) or "(top level)"
        if isinstance(part, int):
            if not isinstance(node, list):
                raise UserError(f"{label} {override.text}: {where} is not a list, it has no [{part}]")
            if part >= len(node):
                raise UserError(f"{label} {override.text}: {where} has {len(node)} entries; there is no [{part}]")
        elif not isinstance(node, dict):
            raise UserError(f"{label} {override.text}: {where} is {type(node).__name__}, not a mapping: it has no "
                            f"key {part!r}")
        if last:
            node[part] = copy.deepcopy(override.value)
            return
        if isinstance(part, str) and (part not in node or node[part] is None):
            node[part] = {} if not isinstance(path[depth + 1], int) else []
        node = node[part]


def apply_overrides(data: Any, overrides: Iterable[str], positions: Positions | None = None,
                    label: str = "--set") -> Any:
    """DATA (a parsed topology document) with each `--set KEY=VALUE` applied in order, as a new document.
    POSITIONS (the file's) is updated so that errors in an overridden value point at its `--set` (LABEL:
    what errors call the override, e.g. `sweep variant NAME:` for a sweep's values)."""
    out = copy.deepcopy(data) if data is not None else {}
    for i, text in enumerate(overrides):
        override = parse_override(text)
        if not isinstance(out, dict):
            raise UserError(f"{label} {text}: the topology is not a mapping")
        _assign(out, override, label)
        if positions is not None:
            mark = OverrideMark(i, f"{label} {text}")
            for table in (positions.values, positions.keys):
                for path in [p for p in table if p[:len(override.path)] == override.path]:
                    del table[path]  # the file's positions inside what the override replaced
                table[override.path] = mark
            for end in range(1, len(override.path)):  # mappings the override created
                positions.values.setdefault(override.path[:end], mark)
    return out


def describe_overrides(overrides: Iterable[str]) -> str:
    """'--set a=1 --set b=2' for headers and notes."""
    return " ".join(f"--set {o}" for o in overrides)
