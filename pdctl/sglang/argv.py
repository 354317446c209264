"""Parse a rendered SGLang command line with a release's flag table: the settings the server will run with.

This mirrors what SGLang's argparse parser does with the same argv (long options, `--flag=value`, unique
prefixes, value arity, int/float conversion, choices, store_true/const/BooleanOptional, SGLang's deprecated
actions), but collects every problem instead of stopping at the first, so check-compat can list them all
with a did-you-mean. Pure Python over the table: SGLang is never imported here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pdctl.sglang.table import Flag, FlagTable, flag_history, renamed_to

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


@dataclass(frozen=True)
class ArgvProblem:
    """One thing SGLang's parser rejects; `flag` is the option as written (None for a stray value)."""

    flag: str | None
    message: str


@dataclass(frozen=True)
class ParsedArgs:
    """The outcome of parsing one argv: values by argparse dest (defaults filled in), what was given."""

    version: str
    values: dict[str, Any]
    given: dict[str, str] = field(default_factory=dict)  # dest -> the option string that set it
    problems: tuple[ArgvProblem, ...] = ()
    warnings: tuple[str, ...] = ()

    def get(self, dest: str, default: Any = None) -> Any:
        return self.values.get(dest, default)


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def convert(flag: Flag, text: str) -> Any:
    """TEXT as FLAG's type (SGLang's converters, re-done); ValueError with argparse's wording on bad input."""
    kind = flag.type
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind.endswith(".human_readable_int"):
            return _human_int(text)
        if kind in ("json.loads",) or kind.endswith(".json_list_type"):
            return json.loads(text)
        if kind.endswith(".nullable_str"):
            return None if not text or text == "None" else text
        if kind.endswith(".parse_cuda_graph_config_arg"):  # a JSON object (its keys SGLang checks further)
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(f"must be a JSON object, got {type(value).__name__}")
            return value
        if kind.endswith(".parse_cuda_graph_backend_arg") and text == "tc_piecewise":
            raise ValueError("tc_piecewise was removed; select breakable, full, or disabled")
    except (ValueError, json.JSONDecodeError) as exc:
        name = kind.rsplit(".", 1)[-1]
        raise ValueError(f"invalid {name} value: {text!r}") from exc
    return text  # str, or a converter pdctl does not re-implement (the text goes through unchanged)


# Converters whose checks pdctl re-implements only in part (the rest is SGLang's, at its startup).
PARTLY_CHECKED = (".parse_cuda_graph_config_arg",)


def _human_int(text: str) -> int:
    value = text.strip()
    m = _HUMAN_INT.fullmatch(value)
    if not m:
        return int(value)
    number, suffix = m.groups()
    if suffix in _IEC:
        if "." in number:
            raise ValueError(f"decimals are not allowed with IEC suffixes: {text!r}")
        return int(number) * _IEC[suffix]
    return int(float(number) * _SI[suffix])


def _check_choice(flag: Flag, value: Any) -> str | None:
    if flag.choices is None or value in flag.choices:
        return None
    shown = ", ".join(repr(c) for c in flag.choices)
    return f"argument {flag.name}: invalid choice: {value!r} (choose from {shown})"


def unknown_option(option: str, table: FlagTable) -> str:
    """SGLang's 'unrecognized arguments' for OPTION, with what pdctl knows: removed/renamed, did-you-mean."""
    msg = f"unrecognized argument {option} (not a flag of SGLang {table.version})"
    history = flag_history(option)
    why = history.explain(table.version)
    if why:
        msg += f": {why}"
        successor = renamed_to(option, table.version)
        if successor:
            msg += f"; use {successor}"
        return msg
    guess = table.suggest(option)
    return msg + (f"; did you mean {guess}?" if guess else "")


class _Parser:
    def __init__(self, table: FlagTable) -> None:
        self.table = table
        self.values: dict[str, Any] = {}
        self.given: dict[str, str] = {}
        self.problems: list[ArgvProblem] = []
        self.warnings: list[str] = []

    def problem(self, flag: str | None, message: str) -> None:
        self.problems.append(ArgvProblem(flag, message))

    def take_values(self, flag: Flag, option: str, attached: str | None, rest: list[str]) -> list[str] | None:
        """The values FLAG consumes from REST (argparse's arity rules); None after reporting a problem."""
        arity = flag.arity
        if attached is not None:
            if arity == 0:
                self.problem(option, f"argument {option}: ignored explicit argument {attached!r}")
                return None
            return [attached]
        following: list[str] = []
        for token in rest:
            if _is_option(token):
                break
            following.append(token)
        if arity == 0:
            return []
        if arity == "?":
            return following[:1]
        if arity in ("*", "+"):
            if arity == "+" and not following:
                self.problem(option, f"argument {option}: expected at least one argument")
                return None
            return following
        count = 1 if arity is None else int(arity)
        if len(following) < count:
            word = "one argument" if count == 1 else f"{count} arguments"
            self.problem(option, f"argument {option}: expected {word}")
            return None
        return following[:count]

    def apply(self, flag: Flag, option: str, raw: list[str]) -> None:
        kind = flag.kind
        if flag.removed:
            self.problem(option, f"argument {option}: {flag.error_message}")
            return
        if kind == "DeprecatedAction":
            self.warnings.append(f"{option} is deprecated and ignored by SGLang {self.table.version}")
            return
        if kind.startswith("Deprecated"):
            self.warnings.append(f"{option} is deprecated in SGLang {self.table.version}"
                                 + (f"; use {flag.new_flag}" if flag.new_flag else ""))
        converted: list[Any] = []
        for text in raw:
            try:
                value = convert(flag, text)
            except ValueError as exc:
                self.problem(option, f"argument {option}: {exc}")
                return
            bad = _check_choice(flag, value)
            if bad:
                self.problem(option, bad)
                return
            converted.append(value)
        self.given[flag.dest] = option
        if kind in ("store_true", "DeprecatedStoreTrueAction"):
            self.values[flag.dest] = True
        elif kind == "store_false":
            self.values[flag.dest] = False
        elif kind == "store_const":
            self.values[flag.dest] = flag.const
        elif kind == "DeprecatedStoreConstAction":
            self.values[flag.dest] = converted[0] if converted and flag.const_value is None else flag.const_value
        elif kind == "boolean_optional":
            self.values[flag.dest] = not option.startswith("--no-")
        elif kind == "count":
            self.values[flag.dest] = (self.values.get(flag.dest) or 0) + 1
        elif kind in ("append", "extend"):
            self.values.setdefault(flag.dest, [])
            self.values[flag.dest] += converted if kind == "extend" or flag.arity not in (None, 1) else converted[:1]
        elif flag.arity in (None, 1, "?") and len(converted) <= 1:
            self.values[flag.dest] = converted[0] if converted else flag.const
        else:
            self.values[flag.dest] = converted

    def run(self, argv: list[str]) -> None:
        i = 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if not _is_option(token):
                self.problem(None, f"unrecognized argument {token!r} (a value without a flag)")
                continue
            option, _, attached_text = token.partition("=")
            attached = attached_text if "=" in token else None
            flag, ambiguous = self.table.resolve(option)
            if flag is None:
                message = unknown_option(option, self.table)
                if ambiguous:  # argparse's words, plus the release history when it explains the spelling
                    why = flag_history(option).explain(self.table.version)
                    message = ambiguous + (f" ({why})" if why else "")
                self.problem(option, message)
                while i < len(argv) and not _is_option(argv[i]):  # skip its values
                    i += 1
                continue
            raw = self.take_values(flag, option, attached, argv[i:])
            if attached is None and raw is not None:
                i += len(raw)
            if raw is not None:
                self.apply(flag, option, raw)


# SGLang <= 0.5.13 names the parallel sizes' argparse dests after their first spelling (--tensor-parallel-size)
# and copies them in ServerArgs.from_cli_args (`args.tp_size = args.tensor_parallel_size`, ...); 0.5.14+ parse
# straight into tp_size. The values below carry both names, as the server sees them.
FROM_CLI_ARGS = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
                 "data_parallel_size": "dp_size", "expert_parallel_size": "ep_size"}


def parse_argv(argv: list[str], table: FlagTable) -> ParsedArgs:
    """ARGV (the server's flags, without `python -m sglang.launch_server`) -> values by dest (under the
    ServerArgs field names too: FROM_CLI_ARGS) + problems. `given` keeps argparse's dests."""
    parser = _Parser(table)
    parser.run(list(argv))
    missing = [f.name for f in table.flags if f.required and f.dest not in parser.given]
    if missing:
        parser.problem(None, f"the following arguments are required: {', '.join(missing)}")
    values = {dest: flag.default for dest, flag in table.by_dest.items()}
    values.update(parser.values)
    for cli_dest, field_name in FROM_CLI_ARGS.items():
        if cli_dest in values and field_name not in table.by_dest:
            values[field_name] = values[cli_dest]
    return ParsedArgs(table.version, values, parser.given, tuple(parser.problems), tuple(parser.warnings))
