"""SGLang versions: parsing version strings, which releases pdctl has flag tables for, and which one judges.

Why one module: the flag table, the version-gated rules and the launch renderer must agree on what
"SGLang 0.5.21" means, and on what pdctl assumes when a topology does not say (`engine.version` missing and
no node asked): the reference runtime, DEFAULT_VERSION.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

Version = tuple[int, ...]
# The runtime COMPAT.md is written against; assumed when nothing better is known.
DEFAULT_VERSION = "0.5.23"
TABLE_DIR = Path(__file__).with_name("flags")  # package data (pyproject: pdctl/**/*.json)
_TABLE_NAME = re.compile(r"^sglang-(.+)\.json$")
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(post|rc|a|b|dev)\.?(\d*))?\s*$", re.IGNORECASE)


def parse_version(text: object) -> Version | None:
    """'0.5.23' -> (0, 5, 23, 0, 0); pre-releases sort below the release, post-releases above; None if odd."""
    m = _VERSION.match(str(text))
    if not m:
        return None
    major, minor, patch, tag, num = m.groups()
    rank = 0
    if tag:
        rank = 1 if tag.lower() == "post" else -1
    return (int(major), int(minor), int(patch or 0), rank, int(num or 0) if tag else 0)


def release(text: str) -> Version:
    """parse_version for strings pdctl itself writes (raises on a typo in pdctl's own constants)."""
    parsed = parse_version(text)
    if parsed is None:
        raise ValueError(f"not a version: {text!r}")
    return parsed


@lru_cache(maxsize=1)
def table_versions() -> tuple[str, ...]:
    """The SGLang releases with a flag table shipped in pdctl/sglang/flags/, oldest first."""
    names = [_TABLE_NAME.match(p.name) for p in TABLE_DIR.iterdir()]
    return tuple(sorted((m.group(1) for m in names if m), key=release))


@dataclass(frozen=True)
class VersionChoice:
    """Which SGLang version judges a topology, and why.

    `asked`: what the topology or the nodes said (None: nothing); `version`: the version rules gate on;
    `table`: the release whose flag table parses the commands; `source`: "engine.version" | "nodes" |
    "assumed"; `note`: a sentence for the report when the table is not exactly the version (or assumed).
    """

    asked: str | None
    version: str
    table: str
    source: str
    note: str | None = None

    @property
    def parsed(self) -> Version:
        return release(self.version)

    def to_dict(self) -> dict[str, object]:
        return {"asked": self.asked, "version": self.version, "table": self.table, "source": self.source,
                "note": self.note}


def choose(version: str | None, source: str = "engine.version") -> VersionChoice:
    """The version and flag table for VERSION (None: DEFAULT_VERSION, said so in `note`).

    A release without a table of its own is judged with the closest older table (a post-release with its
    release's, said so: post-releases add flags too); one older than every table with the oldest; an
    unparsable string as DEFAULT_VERSION.
    """
    known = table_versions()
    if version is None:
        return VersionChoice(None, DEFAULT_VERSION, DEFAULT_VERSION, "assumed",
                             f"engine.version is not set and no node was asked: assuming SGLang {DEFAULT_VERSION}"
                             " (set engine.version, or `pdctl launch` asks the nodes)")
    parsed = parse_version(version)
    if parsed is None:
        return VersionChoice(version, DEFAULT_VERSION, DEFAULT_VERSION, source,
                             f"SGLang version {version!r} is not a version number: judging as {DEFAULT_VERSION}")
    if version in known:
        return VersionChoice(version, version, version, source)
    older = [v for v in known if release(v) <= parsed]
    table = older[-1] if older else known[0]
    note = None if release(table) == parsed else (
        f"no flag table for SGLang {version}: its commands are parsed with {table}'s "
        f"(tables: {known[0]} ... {known[-1]})")
    return VersionChoice(version, version, table, source, note)


def at_least(choice: VersionChoice, since: str) -> bool:
    """True when the judged version is SINCE or newer (a feature or fix that arrived in SINCE is there)."""
    return choice.parsed >= release(since)
