"""Dump SGLang's own command-line parser (`ServerArgs.add_cli_args`) as pdctl's flag table for that release.

Run with an interpreter that imports the SGLang release (no GPU needed; see generate.sh beside this script):
    VENV/bin/python scripts/sglang-flags/dump.py OUT_DIR
Writes OUT_DIR/sglang-<version>.json: for every argparse action, its option strings, dest, kind (the
argparse action class), nargs, choices, value type, default, const, and what a deprecated action says.
pdctl parses rendered commands with this table (pdctl/sglang/argv.py) without importing SGLang.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

# argparse's own action classes -> pdctl's kind names; anything else is SGLang's (named by its class).
KINDS = {
    "_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const", "_AppendAction": "append", "_AppendConstAction": "append_const",
    "_CountAction": "count", "_HelpAction": "help", "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional", "_ExtendAction": "extend",
}
TYPES = {int: "int", float: "float", str: "str", None: "str"}


def jsonable(value: Any) -> Any:
    """VALUE as JSON, or {"repr": ...} for what JSON cannot hold (so the table says it was not a plain value)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"repr": repr(value)}
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return {"repr": repr(value)}


def type_name(action: argparse.Action) -> str:
    """int / float / str, or the converter's qualified name (pdctl then accepts any text)."""
    if action.type in TYPES:
        return TYPES[action.type]
    fn = action.type
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def choices(action: argparse.Action) -> list[Any] | None:
    """The choices as a list; a set's (SGLang has a few: SAMPLING_BACKEND_CHOICES) sorted, since its order
    changes from one interpreter to the next (argparse's own messages then list them in any order)."""
    if action.choices is None:
        return None
    values = [jsonable(c) for c in action.choices]
    if isinstance(action.choices, (set, frozenset)):
        values.sort(key=repr)
    return values


def describe(action: argparse.Action) -> dict[str, Any]:
    cls = type(action).__name__
    doc: dict[str, Any] = {
        "options": list(action.option_strings),
        "dest": action.dest,
        "kind": KINDS.get(cls, cls),
        "nargs": action.nargs if isinstance(action.nargs, (int, str, type(None))) else str(action.nargs),
        "choices": choices(action),
        "type": type_name(action),
        "default": jsonable(action.default),
        "const": jsonable(action.const),
        "required": bool(action.required),
    }
    for extra in ("error_message", "new_flag", "const_value"):  # SGLang's deprecation actions
        if getattr(action, extra, None) is not None:
            doc[extra] = jsonable(getattr(action, extra))
    return doc


def dump() -> dict[str, Any]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    actions = [describe(a) for a in parser._actions if a.option_strings and type(a).__name__ != "_HelpAction"]
    actions.sort(key=lambda a: a["options"][0])
    return {"sglang": sglang.__version__, "source": "ServerArgs.add_cli_args", "actions": actions}


def write(table: dict[str, Any], out_dir: Path) -> Path:
    """One action per line: small diffs between releases, still one JSON document."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"sglang-{table['sglang']}.json"
    lines = [json.dumps(a, sort_keys=True, separators=(",", ":")) for a in table["actions"]]
    head = json.dumps({k: v for k, v in table.items() if k != "actions"}, sort_keys=True)[:-1]
    path.write_text(head + ', "actions": [\n' + ",\n".join(lines) + "\n]}\n", encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))  # still valid JSON
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dump.py OUT_DIR")
    table = dump()
    path = write(table, Path(sys.argv[1]))
    print(f"{path}: {len(table['actions'])} flags of SGLang {table['sglang']}")
