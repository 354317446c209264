"""A topology file with `sweep:` loaded as its variants: one validated Topology per variant (or the variant's
bad-input message), for the commands that take sweeps (check-compat, launch).

Each variant is built the way a single topology is (pdctl.topology.loader.build_topology): the file, then
`--set`, then the variant's values, then the cluster profile. A variant whose values make the document invalid
(a value of the wrong type, a TP that a DP does not divide) is reported as that variant's failure; when every
variant is invalid the sweep itself is bad input (exit 2: a misspelt key fails them all alike).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from pdctl.errors import UserError
from pdctl.topology.loader import build_topology, read_document
from pdctl.topology.model import Topology
from pdctl.topology.overrides import apply_overrides
from pdctl.topology.profile import LoadedProfile
from pdctl.topology.sweep import Sweep, Variant, parse_sweep


@dataclass(frozen=True)
class VariantLoad:
    """One variant: its topology, or why its document is invalid (`error`)."""

    variant: Variant
    topology: Topology | None
    error: str | None = None


@dataclass(frozen=True)
class SweepLoad:
    """A sweep file: the sweep section and every variant, in the sweep's order."""

    source: Path
    sweep: Sweep
    variants: list[VariantLoad]


def load_sweep(path: str | Path, overrides: tuple[str, ...] | list[str] = (), *,
               profile: LoadedProfile | None = None) -> SweepLoad | None:
    """PATH's variants (None when PATH has no `sweep:`, after `--set`: `--set sweep=null` makes it a plain
    topology); UserError when the file, its sweep section or every variant is bad input."""
    data, positions, source = read_document(path)
    base = apply_overrides(data, overrides, copy.deepcopy(positions)) if overrides else data
    sweep = parse_sweep(base, source, positions)
    if sweep is None:
        return None
    resolved = Path(path).resolve()
    loads: list[VariantLoad] = []
    for variant in sweep.variants():
        try:
            topo = build_topology(copy.deepcopy(data), source, copy.deepcopy(positions), source_path=resolved,
                                  overrides=overrides, profile=profile, variant=variant)
            loads.append(VariantLoad(variant, topo))
        except UserError as exc:
            loads.append(VariantLoad(variant, None, exc.message))
    if not any(v.topology is not None for v in loads):
        first = loads[0]
        raise UserError(f"every variant of the sweep in {source} is invalid; the first, {first.variant.name}:\n"
                        f"{first.error}")
    return SweepLoad(resolved, sweep, loads)
