"""The attention-TP split of a deployment target, whatever fronts it: the one place parity learns TPs.

Why: the noise floor needs a TP control exactly when the candidate's split (the attention TP of the servers
computing the prompt and the generated tokens) differs from the reference's (pdctl.parity.controls), and a
split that cannot be learned leaves the floor uncalibrated (issue 35: a reference given as the URL of an
sglang-router in front of a colocated server had "unknown" splits, a floor of 0, and clean runs FAILED).

Where each server's TP comes from, first that answers:
1. the server's own `/server_info` (`tp_size`, divided by `dp_size` under `enable_dp_attention`) — the servers
   are those pdctl.target found: a PD router's prefill and decode workers, a regular router's plain servers
   (its GET /workers), a run's processes (state.json), or the URL itself (a plain server);
2. what the router read from it (sglang-router 0.3.2's GET /workers `metadata`: `tp_size`, `dp_size`; DP
   attention is not in it, so a dp_size above 1 leaves the TP unknown);
3. the run's topology (a `pdctl launch` run dir: the role's `attn_tp`).
A role whose servers run different TPs has no single split (unknown, and said so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdctl.parity.prompts import first_info
from pdctl.runs.state import topology_file_of_run
from pdctl.target import Target, get_json, url_target
from pdctl.topology import load_topology


def _int(value: Any) -> int | None:
    """A positive int from JSON or from a router's string metadata ("2")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value >= 1 else None


def attention_tp(info: dict[str, Any] | None) -> int | None:
    """The attention-TP size a server's /server_info describes (None when it does not say)."""
    doc = first_info(info or {})
    tp = _int(doc.get("tp_size"))
    if tp is None:
        return None
    dp = _int(doc.get("dp_size"))
    if doc.get("enable_dp_attention") and dp is not None and dp > 1 and tp % dp == 0:
        return tp // dp
    return tp


def metadata_tp(meta: dict[str, Any] | None) -> int | None:
    """The attention TP from what sglang-router lists of a worker (`metadata`, values as strings). It does not
    say whether DP attention is on, so only dp_size 1 (or absent) gives an answer."""
    meta = meta or {}
    tp, dp = _int(meta.get("tp_size")), _int(meta.get("dp_size"))
    return tp if tp is not None and dp in (None, 1) else None


def info_of(url: str) -> dict[str, Any] | None:
    return get_json(url, "/server_info", "/get_server_info")


@dataclass(frozen=True)
class Split:
    """The attention TP of the server computing the prompt and of the one computing the generated tokens."""

    prefill: int | None
    decode: int | None

    @property
    def known(self) -> bool:
        return self.prefill is not None and self.decode is not None

    def as_list(self) -> list[int | None]:
        return [self.prefill, self.decode]


@dataclass(frozen=True)
class Found:
    """A target's split, the /server_info of the server computing its prompts, how each TP was learned, and why
    the split is unknown (empty when known)."""

    split: Split
    info: dict[str, Any] | None
    servers: list[dict[str, Any]]  # {"url", "role", "tp", "source"} per server
    unknown_because: str = ""


def _role_tps(target: Target) -> dict[str, list[str]]:
    """The servers TARGET stands for, by the role they play in its split (a role not known: the URL itself)."""
    if target.prefill_urls or target.flush_decode:
        return {"prefill": target.prefill_urls or [target.url], "decode": target.flush_decode or [target.url]}
    return {"colocated": target.colocated_urls or [target.url]}


def _run_tps(target: Target) -> dict[str, int]:
    """Attention TP per role from the run's topology (a run dir's records), {} when there is none."""
    if target.run_dir is None:
        return {}
    path = topology_file_of_run(target.run_dir, target.state)
    if path is None:
        return {}
    topo = load_topology(path)
    return {name: getattr(topo, name).attn_tp for name in ("prefill", "decode", "colocated")
            if getattr(topo, name, None) is not None}


def _one(role: str, urls: list[str], infos: dict[str, dict[str, Any] | None], target: Target,
         run: dict[str, int], servers: list[dict[str, Any]]) -> tuple[int | None, str]:
    """The single TP of ROLE's servers (None and why when unknown or mixed); each server goes to SERVERS."""
    tps: set[int | None] = set()
    for url in urls:
        tp, source = attention_tp(infos.get(url)), "/server_info"
        if tp is None:
            tp, source = metadata_tp(target.worker_meta.get(url)), "router /workers metadata"
        if tp is None and role in run:
            tp, source = run[role], "run topology"
        servers.append({"url": url, "role": role, "tp": tp, "source": source if tp is not None else None})
        tps.add(tp)
    if not urls:
        return None, f"no {role} server is known"
    if None in tps:
        bad = [s["url"] for s in servers if s["role"] == role and s["tp"] is None]
        return None, (f"no TP for the {role} server(s) {', '.join(bad)} (no tp_size in /server_info, nor in a "
                      "router's /workers, nor in a run's topology)")
    if len(tps) > 1:
        known = sorted(t for t in tps if t is not None)
        return None, f"its {role} servers run different TPs ({', '.join(map(str, known))})"
    return next(iter(tps)), ""


def discover_split(target: Target) -> Found:
    """TARGET's split, learned from every server it stands for (module docstring: where each TP comes from)."""
    roles = _role_tps(target)
    infos = {url: info_of(url) for urls in roles.values() for url in urls}
    run = _run_tps(target)
    servers: list[dict[str, Any]] = []
    reasons: list[str] = []
    tps: dict[str, int | None] = {}
    for role, urls in roles.items():
        tps[role], why = _one(role, urls, infos, target, run, servers)
        if why:
            reasons.append(why)
    first_urls = roles.get("prefill") or roles.get("colocated") or []
    info = infos.get(first_urls[0]) if first_urls else None
    if "colocated" in tps:
        split = Split(tps["colocated"], tps["colocated"])
    else:
        split = Split(tps.get("prefill"), tps.get("decode"))
    return Found(split, info, servers, "; ".join(reasons))


def control_tp(url: str) -> tuple[int | None, Target]:
    """The attention TP of a --tp-control URL — a server, or a router in front of one — and its target."""
    target = url_target(url)
    found = discover_split(target)
    split = found.split
    return (split.prefill if split.known and split.prefill == split.decode else None), target
