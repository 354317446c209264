"""Derived facts the rules share (attention TPs, hybrid SWA, GPU kinds, the judged version), computed once.

The rules read EFFECTIVE role settings (pdctl/compat/effective.py: what the rendered commands run with), and
the definitions of COMPAT.md (attn_tp, unequal, hybrid_swa, mla) live here in one place, so every rule reads
the same meaning of "unequal TP" or "hybrid SWA" and stays a one-liner over these facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdctl.compat.effective import Effective, EffectiveRole
from pdctl.models.spec import ModelSpec
from pdctl.sglang.versions import at_least, parse_version
from pdctl.topology.sections import BLACKWELL_GPUS

if TYPE_CHECKING:
    from pdctl.topology.placement import ReplicaPlacement

BLACKWELL = BLACKWELL_GPUS  # SM100 family
HOPPER = frozenset({"h100", "h200"})  # SM90

__all__ = ["BLACKWELL", "HOPPER", "Context", "parse_version"]


@dataclass(frozen=True)
class Context:
    """A topology, its resolved model spec, the effective settings of its rendered processes, and the
    placement they were rendered from."""

    topo: Any
    spec: ModelSpec
    eff: Effective
    placements: list[ReplicaPlacement]

    @property
    def pre(self) -> EffectiveRole:
        """The prefill role (PD rules only: never read on a colocated topology)."""
        return self.eff.roles["prefill"]

    @property
    def dec(self) -> EffectiveRole:
        """The decode role (PD rules only, as `pre`)."""
        return self.eff.roles["decode"]

    @property
    def colocated(self) -> bool:
        """A `mode: colocated` topology: one kind of plain server, no KV transfer."""
        return getattr(self.topo, "mode", "pd") == "colocated"

    @property
    def sglang(self) -> bool:
        """The servers are SGLang (not pdctl's reference engine): version-gated rules apply."""
        return self.topo.engine.kind == "sglang"

    def roles(self) -> list[EffectiveRole]:
        """[prefill, decode], or [colocated]: what the rules about single servers iterate."""
        return [self.eff.roles[r.name] for r in self.topo.roles()]

    def since(self, version: str) -> bool:
        """The judged SGLang version is VERSION or newer."""
        return at_least(self.eff.version, version)

    @property
    def version_words(self) -> str:
        """'SGLang 0.5.21' (+ ', assumed' when nothing said which) for messages."""
        v = self.eff.version
        return f"SGLang {v.version}" + (" (assumed)" if v.source == "assumed" else "")

    @property
    def unequal(self) -> bool:
        """Prefill and decode attention TP differ: SGLang's head-slice transfer path."""
        return self.pre.attn_tp != self.dec.attn_tp

    @property
    def mla(self) -> bool:
        return self.spec.mla

    @property
    def kv_heads(self) -> int:
        return self.spec.num_kv_heads

    @property
    def hybrid_swa(self) -> bool:
        """The model has sliding-window layers and SGLang keeps them in a separate SWA pool."""
        return self.spec.hybrid_swa and any(r.hybrid_swa_memory for r in self.roles())

    def kv_entries(self, role: EffectiveRole) -> int:
        """KV buffers a role registers for transfer: one page envelope with unified memory, else K and V per layer."""
        return 1 if role.unified_memory else 2 * len(self.spec.kv_layers)

    def gpu_kinds(self, role: EffectiveRole) -> list[str]:
        """GPU kinds of a role's nodes, in node order, without repeats."""
        kinds: list[str] = []
        for name in role.nodes:
            kind = self.topo.node(name).gpu
            if kind not in kinds:
                kinds.append(kind)
        return kinds

    @property
    def backend(self) -> str:
        """The transfer library the prefill runs (nixl | mooncake | ...), as its command says."""
        return self.pre.backend

    @property
    def staging(self) -> bool:
        return any(r.staging for r in self.roles())
