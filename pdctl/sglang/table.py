"""SGLang's command-line flags for one release, as data: `FlagTable` over pdctl/sglang/flags/sglang-X.json.

The tables are dumps of SGLang's own parser (`ServerArgs.add_cli_args`, see scripts/sglang-flags/), so pdctl
knows every flag, its value arity, type, choices and default per release without importing SGLang (which
needs torch and friends). `flag_history` compares the releases, so a flag that was removed or renamed is
reported with the release that changed it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pdctl.sglang.versions import TABLE_DIR, release, table_versions

# kinds whose flag takes no value on the command line
NO_VALUE_KINDS = frozenset({"store_true", "store_false", "store_const", "append_const", "count",
                            "DeprecatedStoreTrueAction"})


@dataclass(frozen=True)
class Flag:
    """One argparse action of SGLang's parser (all its option strings share it)."""

    options: tuple[str, ...]
    dest: str
    kind: str
    nargs: int | str | None
    choices: tuple[Any, ...] | None
    type: str
    default: Any
    const: Any = None
    required: bool = False
    error_message: str | None = None
    new_flag: str | None = None
    const_value: Any = None

    @property
    def name(self) -> str:
        """The main spelling (the first long option)."""
        return next((o for o in self.options if o.startswith("--")), self.options[0])

    @property
    def arity(self) -> int | str:
        """Values the flag consumes: 0, 1, an int N, or argparse's '?', '*', '+'."""
        if self.nargs is not None:
            return self.nargs
        return 0 if self.kind in NO_VALUE_KINDS else 1

    @property
    def removed(self) -> bool:
        """A retired flag that stops SGLang with a message (SGLang's DeprecatedAction with error_message)."""
        return self.kind == "DeprecatedAction" and self.error_message is not None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Flag:
        choices = doc.get("choices")
        return cls(
            options=tuple(doc["options"]), dest=doc["dest"], kind=doc["kind"], nargs=doc.get("nargs"),
            choices=tuple(choices) if choices is not None else None, type=doc.get("type", "str"),
            default=_plain(doc.get("default")), const=_plain(doc.get("const")), required=bool(doc.get("required")),
            error_message=doc.get("error_message"), new_flag=doc.get("new_flag"),
            const_value=_plain(doc.get("const_value")),
        )


def _plain(value: Any) -> Any:
    """Values the dump could not write as JSON ({"repr": ...}) count as unknown (None)."""
    return None if isinstance(value, dict) and "repr" in value else value


@dataclass(frozen=True)
class FlagTable:
    """Every flag of one SGLang release, looked up the way argparse looks them up."""

    version: str
    flags: tuple[Flag, ...]
    by_option: dict[str, Flag] = field(repr=False)
    by_dest: dict[str, Flag] = field(repr=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> FlagTable:
        flags = tuple(Flag.from_json(a) for a in doc["actions"])
        by_option = {o: f for f in flags for o in f.options}
        by_dest: dict[str, Flag] = {}
        for f in flags:  # the flag that owns a dest is its non-deprecated spelling
            if f.dest not in by_dest or by_dest[f.dest].kind.startswith("Deprecated"):
                by_dest[f.dest] = f
        return cls(str(doc["sglang"]), flags, by_option, by_dest)

    def __contains__(self, option: str) -> bool:
        return option in self.by_option

    def resolve(self, option: str) -> tuple[Flag | None, str | None]:
        """(flag, None) for an exact option or an unambiguous prefix of one (argparse's allow_abbrev, as
        SGLang's parser has it); (None, why) for an unknown or ambiguous option."""
        exact = self.by_option.get(option)
        if exact is not None:
            return exact, None
        if option.startswith("--") and len(option) > 2:
            matches = {o: f for o, f in self.by_option.items() if o.startswith(option)}
            distinct = {id(f) for f in matches.values()}
            if len(distinct) == 1:
                return next(iter(matches.values())), None
            if len(distinct) > 1:
                return None, (f"ambiguous option: {option} could match {', '.join(sorted(matches))}")
        return None, None

    def suggest(self, option: str) -> str | None:
        """The closest real option to a misspelt one (did-you-mean), or None."""
        import difflib  # error path only

        match = difflib.get_close_matches(option, list(self.by_option), n=1, cutoff=0.75)
        return match[0] if match else None


@cache
def load_table(version: str) -> FlagTable:
    """The flag table of SGLang VERSION (one of `table_versions()`); KeyError if pdctl has none."""
    if version not in table_versions():
        raise KeyError(f"no SGLang flag table for {version} (have: {', '.join(table_versions())})")
    text = (TABLE_DIR / f"sglang-{version}.json").read_text(encoding="utf-8")
    return FlagTable.from_json(json.loads(text))


@dataclass(frozen=True)
class FlagHistory:
    """In which releases (of those with tables) an option string exists."""

    option: str
    present: tuple[str, ...]

    def explain(self, version: str) -> str | None:
        """Why OPTION is not in VERSION although some release has it: removed in X / only since Y."""
        if not self.present:
            return None
        newer = [v for v in self.present if release(v) > release(version)]
        older = [v for v in self.present if release(v) < release(version)]
        if older and not newer:
            gone = next(v for v in table_versions() if release(v) > release(older[-1]))
            return f"{self.option} was removed in SGLang {gone} (last in {older[-1]})"
        if newer and not older:
            return f"{self.option} only exists since SGLang {newer[0]}"
        return f"{self.option} exists in SGLang {', '.join(self.present)}, not in {version}"


def flag_history(option: str) -> FlagHistory:
    """Which tabled releases know OPTION (loads every table: for error messages only)."""
    return FlagHistory(option, tuple(v for v in table_versions() if option in load_table(v)))


def renamed_to(option: str, version: str) -> str | None:
    """For an option removed before VERSION: the option of VERSION that took over its dest, if one did."""
    for old in reversed(table_versions()):
        table = load_table(old)
        flag = table.by_option.get(option)
        if flag is not None:
            current = load_table(version).by_dest.get(flag.dest)
            return current.name if current is not None else None
    return None
