"""`sweep:` in a topology: one file, many variants (srtctl's `sweep:` / `override_*` / `zip_override_*`).

    sweep:
      params:                       # dotted keys, as `--set` spells them -> the values to try
        prefill.tp: [2, 4]
        server.mem_fraction_static: [0.80, 0.85]
      zip: false                    # false: every combination (4 variants); true: pair the lists in order

Each variant is the topology document with its values set (`pdctl.topology.overrides`, the code `--set` uses),
so a variant's bad value gets the same located message as in the file. Variants are named after their values
(`prefill.tp=2_server.mem_fraction_static=0.8`) and that name is the variant's run dir under --run-dir.
check-compat judges every variant before anything is submitted; `launch` submits one run per variant.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from pdctl.errors import UserError
from pdctl.topology.overrides import parse_key
from pdctl.topology.yamltree import Positions, format_path, located

SWEEP_KEY = "sweep"
MAX_VARIANTS = 256  # a grid beyond this is a typo (or a job array), not a sweep to check one by one
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Variant:
    """One point of a sweep: its name (and run-dir name) and its values by dotted key, in params order."""

    name: str
    values: dict[str, Any]

    def overrides(self) -> list[str]:
        """The variant as `--set KEY=VALUE` texts (values as JSON: a YAML flow scalar, list or mapping)."""
        return [f"{key}={json.dumps(value)}" for key, value in self.values.items()]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "overrides": dict(self.values)}


@dataclass(frozen=True)
class Sweep:
    """The parsed `sweep:` section: params (key -> values) and whether the lists are zipped."""

    params: dict[str, list[Any]]
    zip: bool = False

    def variants(self) -> list[Variant]:
        keys = list(self.params)
        lists = [self.params[k] for k in keys]
        if self.zip:
            length = max(len(v) for v in lists)
            rows = [tuple(v[i] if len(v) > 1 else v[0] for v in lists) for i in range(length)]
        else:
            rows = list(itertools.product(*lists))
        out: list[Variant] = []
        seen: dict[str, int] = {}
        for row in rows:
            values = dict(zip(keys, row))
            name = variant_name(values)
            if name in seen:  # values that print alike (1 and "1"): keep both, numbered
                seen[name] += 1
                name = f"{name}~{seen[name]}"
            else:
                seen[name] = 0
            out.append(Variant(name, values))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"params": {k: list(v) for k, v in self.params.items()}, "zip": self.zip}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def variant_name(values: dict[str, Any]) -> str:
    """'prefill.tp=2_decode.tp=4': a file name (characters outside [A-Za-z0-9._=+-] become '-')."""
    name = "_".join(f"{key}={_text(value)}" for key, value in values.items())
    return _UNSAFE.sub("-", name).strip("-.")[:200] or "variant"


def parse_sweep(data: Any, source: str, positions: Positions | None = None) -> Sweep | None:
    """The `sweep:` section of a topology document (None when it has none); UserError (exit 2) located at the
    section's key or value on bad input."""
    if not isinstance(data, dict) or data.get(SWEEP_KEY) is None:
        return None
    positions = positions or Positions()

    def bad(path: tuple[str | int, ...], message: str) -> UserError:
        return UserError(located(source, positions.value_at(path), path, message))

    section = data[SWEEP_KEY]
    if not isinstance(section, dict):
        raise bad((SWEEP_KEY,), "expected a mapping {params: {dotted.key: [values, ...]}, zip: false}")
    unknown = [k for k in section if k not in ("params", "zip")]
    if unknown:
        raise bad((SWEEP_KEY, unknown[0]), f"unknown key {unknown[0]!r}; expected params and zip")
    zipped = section.get("zip", False)
    if not isinstance(zipped, bool):
        raise bad((SWEEP_KEY, "zip"), "expected true (pair the lists) or false (every combination)")
    params = section.get("params")
    if not isinstance(params, dict) or not params:
        raise bad((SWEEP_KEY, "params"), "expected a mapping of dotted keys to lists of values, e.g. "
                  "{prefill.tp: [2, 4]}")
    out: dict[str, list[Any]] = {}
    for key, values in params.items():
        where = (SWEEP_KEY, "params", key)
        try:
            path = parse_key(str(key), f"{key}=...")
        except UserError as exc:
            raise bad(where, str(exc).removeprefix(f"--set {key}=...: ")) from None
        if path and path[0] in (SWEEP_KEY, "name"):
            raise bad(where, f"{format_path(path)} cannot be swept (each variant is named after its values)")
        if not isinstance(values, list) or not values:
            raise bad(where, "expected a non-empty list of values to try")
        out[str(key)] = values
    if zipped:
        lengths = {k: len(v) for k, v in out.items() if len(v) > 1}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise bad((SWEEP_KEY, "zip"), f"zip: true pairs the lists in order, so they need one length (or 1, "
                      f"used for every variant); got {shown}")
    sweep = Sweep(out, zipped)
    count = max(len(v) for v in out.values()) if zipped else _product(len(v) for v in out.values())
    if count > MAX_VARIANTS:
        raise bad((SWEEP_KEY, "params"), f"{count} variants (at most {MAX_VARIANTS}): split the sweep")
    return sweep


def _product(sizes: Any) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total


def without_sweep(data: Any) -> Any:
    """DATA without its `sweep:` section (the base every variant starts from)."""
    if isinstance(data, dict) and SWEEP_KEY in data:
        return {k: v for k, v in data.items() if k != SWEEP_KEY}
    return data
