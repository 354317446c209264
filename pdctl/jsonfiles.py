"""Reading the JSON and JSONL files users hand to pdctl (model configs, prompt and data files).

Why one place: these files are user input, so every failure (unreadable, not UTF-8, not JSON, not an object)
must become a UserError that names the file and, for JSONL, the line - never a traceback - and the wording
should be the same whichever command read the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.errors import UserError


def read_json_object(path: Path, what: str, *, missing_hint: str | None = None) -> dict[str, Any]:
    """The JSON object in PATH (WHAT names the file in messages, e.g. "model config").

    MISSING_HINT, when given, replaces the generic message for a file that does not exist, so a caller can
    say how to create it.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        if missing_hint is not None:
            raise UserError(f"{path}: {missing_hint}") from None
        raise UserError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object in a {what}, got {type(data).__name__}")
    return data


def iter_jsonl(path: Path, what: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of the JSONL file PATH.

    WHAT names the file in the read error ("cannot read WHAT PATH"); a line that is not JSON is a UserError
    "PATH:LINE: not valid JSON", so callers only validate the shape of each value. Lines end at "\n" only
    (a "\r" before it is JSON whitespace): str.splitlines() would also cut at U+2028 or U+0085, which JSON
    writers leave unescaped inside strings.
    """
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        yield lineno, doc
