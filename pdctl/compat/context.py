"""Derived facts the rules share (attention TPs, hybrid SWA, GPU kinds), computed once per topology.

Keeping the definitions of COMPAT.md (attn_tp, unequal, hybrid_swa, mla) in one place means every rule
reads the same meaning of "unequal TP" or "hybrid SWA" — the rules stay one-liners over these facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pdctl.models.spec import ModelSpec
from pdctl.topology.sections import BLACKWELL_GPUS

BLACKWELL = BLACKWELL_GPUS  # SM100 family
HOPPER = frozenset({"h100", "h200"})  # SM90


@dataclass(frozen=True)
class Context:
    """A topology and its resolved model spec, plus the derived facts the rules use."""

    topo: Any
    spec: ModelSpec

    @property
    def pre(self) -> Any:
        """The prefill role (PD rules only: None on a colocated topology, whose rules never read it)."""
        return self.topo.prefill

    @property
    def dec(self) -> Any:
        """The decode role (PD rules only, as `pre`)."""
        return self.topo.decode

    @property
    def colocated(self) -> bool:
        """A `mode: colocated` topology: one kind of plain server, no KV transfer."""
        return getattr(self.topo, "mode", "pd") == "colocated"

    def roles(self) -> list[Any]:
        """[prefill, decode], or [colocated]: what the rules about single servers iterate."""
        return list(self.topo.roles())

    @property
    def unequal(self) -> bool:
        """Prefill and decode attention TP differ: SGLang's head-slice transfer path."""
        return self.pre.attn_tp != self.dec.attn_tp

    @property
    def mla(self) -> bool:
        return self.spec.mla

    @property
    def hybrid_swa(self) -> bool:
        """The model has sliding-window layers and SGLang keeps them in a separate SWA pool."""
        return self.spec.hybrid_swa and any(r.hybrid_swa_memory for r in self.roles())

    @property
    def swa_head_slice(self) -> bool:
        """The SWA state goes through `_get_mha_head_slice_blocks`: unequal TP, hybrid SWA, not MLA."""
        return self.unequal and self.hybrid_swa and not self.mla

    def kv_entries(self, role: Any) -> int:
        """KV buffers a role registers for transfer: one page envelope with unified memory, else K and V per layer."""
        return 1 if role.unified_memory else 2 * self.spec.num_layers

    def gpu_kinds(self, role: Any) -> list[str]:
        """GPU kinds of a role's nodes, in node order, without repeats."""
        kinds: list[str] = []
        for name in role.nodes:
            kind = self.topo.node(name).gpu
            if kind not in kinds:
                kinds.append(kind)
        return kinds

    @property
    def backend(self) -> str:
        return str(self.topo.transfer.backend)

    @property
    def staging(self) -> bool:
        return bool(self.topo.transfer.staging_buffer)


_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(post|rc|a|b|dev)\.?(\d*))?\s*$", re.IGNORECASE)


def parse_version(text: str) -> tuple[int, ...] | None:
    """'0.5.23' -> (0, 5, 23, 0); pre-releases sort below the release, post-releases above; None if odd."""
    m = _VERSION.match(str(text))
    if not m:
        return None
    major, minor, patch, tag, num = m.groups()
    rank = 0
    if tag:
        rank = 1 if tag.lower() == "post" else -1
    return (int(major), int(minor), int(patch or 0), rank, int(num or 0) if tag else 0)
