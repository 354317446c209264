"""The per-item results JSONL: one line per answered question, written as it completes, read back by --resume.

Why one line per item, flushed at once: an eval of a large model takes long enough to be interrupted (Ctrl-C,
a lost SSH session, a killed CI job). What finished must survive and not be asked again. Each line carries a
`key` (a hash of the exact prompt, API and max_new_tokens), so that --resume refuses a file written with other
settings instead of silently mixing two evals.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from pdctl.errors import UserError
from pdctl.evals.base import Item
from pdctl.evals.client import Completion


def request_key(prompt: str, api: str, max_new_tokens: int) -> str:
    """A short hash of what determines an answer; --resume keeps a line only when its key matches."""
    text = json.dumps([prompt, api, max_new_tokens], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def make_record(item: Item, key: str, completion: Completion | None, error: str | None, attempts: int,
                score: Callable[[str, Item], dict[str, Any]]) -> dict:
    """The JSONL record of ITEM: the eval's SCORE of the completion, or of an empty output when it failed
    (`error`).

    A failed item scores as an empty answer (wrong, invalid), as in SGLang's run_eval, so that every metric
    stays a fraction of all questions asked.
    """
    output = completion.text if completion is not None else ""
    record: dict[str, Any] = {"index": item.index, "key": key, "question": item.question, **score(output, item)}
    record.update(
        output=output,
        error=error,
        attempts=attempts,
        completion_tokens=completion.completion_tokens if completion else 0,
        prompt_tokens=completion.prompt_tokens if completion else None,
        finish_reason=completion.finish_reason if completion else None,
        latency_s=round(completion.latency_s, 4) if completion else None,
    )
    if completion is not None and completion.reasoning:
        record["reasoning"] = completion.reasoning
    return record


def read_records(path: str | Path) -> list[dict]:
    """Records of a results file; a torn last line (the eval was killed mid-write) is dropped.

    Read as bytes and split at b"\n" only: a torn line may end inside a UTF-8 sequence, and a record's text
    (written with ensure_ascii=False) may hold U+2028 or U+0085, where str.splitlines() would cut it.
    """
    path = Path(path)
    records: list[dict] = []
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UserError(f"cannot read results file {path}: {exc.strerror or exc}") from exc
    if lines and not lines[-1]:
        lines.pop()  # the empty piece after the final newline
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)  # bytes: decoded as UTF-8; a bad sequence is a ValueError too
        except ValueError:
            if lineno == len(lines):
                break  # torn write at the end
            raise UserError(f"{path}:{lineno}: not a pdctl gsm8k results line (not JSON)") from None
        if not isinstance(doc, dict) or "index" not in doc or "key" not in doc:
            raise UserError(f"{path}:{lineno}: not a pdctl gsm8k results line (no index/key)")
        records.append(doc)
    return records


def resumable(path: str | Path, keys: dict[int, str]) -> dict[int, dict]:
    """Finished records of PATH to keep, by index: those answered without error for the same KEYS.

    A line whose key differs means the file belongs to another eval: UserError rather than a mixed result.
    Failed items (with `error`) are not kept, so --resume asks them again.
    """
    kept: dict[int, dict] = {}
    for rec in read_records(path):
        index = rec["index"]
        if index not in keys:
            continue  # e.g. an earlier run with more --num-questions: not part of this eval
        if rec["key"] != keys[index]:
            raise UserError(
                f"{path} was written by an eval with other settings (prompt, --api or --max-new-tokens differ "
                f"for item {index}); drop --resume to start over, or pass another --results file"
            )
        if not rec.get("error"):
            kept[index] = rec
    return kept


class ResultsWriter:
    """Appends records to the results file, one flushed line each (a SIGKILL loses at most the line in flight)."""

    def __init__(self, path: str | Path | None, keep: list[dict] | None = None) -> None:
        """Open PATH anew holding only KEEP (rewritten atomically), or write nothing when PATH is None."""
        self.path = Path(path) if path is not None else None
        self._fh: IO[str] | None = None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in keep or [])
        os.replace(tmp, self.path)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole eval; close()

    def write(self, record: dict) -> None:
        """Append RECORD and flush it to the OS at once."""
        if self._fh is not None:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
