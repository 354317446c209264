"""The on-disk cache of AIConfigurator's results (`.pdctl/cache/suggest/`), keyed by its inputs and its version.

Why: one AIConfigurator sweep costs tens of CPU seconds (the per-worker model over every parallel layout and
batch size, then the rate matching over its TPOT constraint list; docs/suggest.md has the measurements), and
its answer depends only on its inputs and its version. Two levels: the worker frames (per model, system, GPU
budget, ISL/OSL: the expensive part) and the matched rows (per TTFT budget and gate too). Files are JSON, never
pickles: a cache directory inside a project checkout must not be a way to run code. A key holds the
AIConfigurator version and FORMAT, so an upgrade or a change of pdctl's wrapper never reads stale numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

FORMAT = 2  # bump when the recorded columns or the way rows are recorded change
ENV = "PDCTL_SUGGEST_CACHE"  # overrides the directory (tests, CI caches)
DEFAULT_DIR = Path(".pdctl") / "cache" / "suggest"
FALLBACKS = "_moe_comm_fallbacks"  # a column of MoECommFallback records (dataclasses)


def default_dir() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_DIR)


def digest(kind: str, key: dict[str, Any]) -> str:
    text = json.dumps({"kind": kind, "format": FORMAT, **key}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Cache:
    """JSON documents by (kind, key) under ROOT; unreadable or corrupt entries count as missing. READ false:
    nothing is read (a recomputation), what is computed is still written."""

    def __init__(self, root: Path | str | None = None, *, read: bool = True) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.read = read

    def path(self, kind: str, key: dict[str, Any]) -> Path:
        return self.root / f"{kind}-{digest(kind, key)}.json"

    def get(self, kind: str, key: dict[str, Any]) -> Any | None:
        if not self.read:
            return None
        try:
            doc = json.loads(self.path(kind, key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc.get("value") if isinstance(doc, dict) and doc.get("key") == _plain(key) else None

    def put(self, kind: str, key: dict[str, Any], value: Any) -> None:
        """Write atomically (a reader never sees half a file); a cache that cannot be written is no error."""
        target = self.path(kind, key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"key": _plain(key), "value": value}), encoding="utf-8")
            tmp.replace(target)
        except OSError:
            return

    def get_frames(self, key: dict[str, Any]) -> dict[str, Any]:
        """AIConfigurator's worker frames (role -> DataFrame) for KEY, or {} when not cached."""
        doc = self.get("workers", key)
        if not doc:
            return {}
        return {role: frame_from_json(part) for role, part in doc.items()}

    def put_frames(self, key: dict[str, Any], frames: dict[str, Any]) -> None:
        if {"prefill", "decode"} <= set(frames):
            self.put("workers", key, {role: frame_to_json(frames[role]) for role in ("prefill", "decode")})


def _plain(key: dict[str, Any]) -> Any:
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def frame_to_json(df: Any) -> dict[str, Any]:
    """A worker DataFrame -> JSON that rebuilds it exactly (dtypes, column order, float bits)."""
    rows = []
    for row in df.itertuples(index=False, name=None):
        out = []
        for col, value in zip(df.columns, row):
            if col == FALLBACKS:
                value = [asdict(r) if is_dataclass(r) else r for r in (value or ())]
            elif isinstance(value, dict):
                value = json.loads(json.dumps(value, default=str))
            elif hasattr(value, "item"):
                value = value.item()
            out.append(value)
        rows.append(out)
    return {"columns": [str(c) for c in df.columns], "dtypes": [str(t) for t in df.dtypes], "rows": rows}


def frame_from_json(doc: dict[str, Any]) -> Any:
    import pandas as pd
    from aiconfigurator.sdk.performance_result import MoECommFallback

    cols = doc["columns"]
    fb = cols.index(FALLBACKS) if FALLBACKS in cols else None
    rows = []
    for row in doc["rows"]:
        row = list(row)
        if fb is not None:
            row[fb] = tuple(MoECommFallback(**r) for r in row[fb])
        rows.append(row)
    df = pd.DataFrame(rows, columns=cols)
    for col, dtype in zip(cols, doc["dtypes"]):
        if dtype in ("int64", "float64", "bool") or dtype in ("str", "string"):
            df[col] = df[col].astype(dtype)
    return df
