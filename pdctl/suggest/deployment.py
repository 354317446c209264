"""A candidate as a topology: the data check-compat judges and the file `--out` writes.

Built from the skeleton the user gave (its engine, nodes, transfer, server, router, eval, bench, slurm sections
are kept; only the roles' parallelism, replicas, nodes and the few args the candidate needs change) or, without
one, from defaults: `ceil(gpus / gpus-per-node)` nodes of the GPU kind, named `n0, n1, ...` with hosts to
edit. Both roles list the nodes; placement (pdctl.topology.placement) packs prefill first and decode into the
rest; when that leaves a replica split unevenly, the decode order is reversed, and if no order fits, the
`placement` rule of check-compat says so on the candidate.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from pdctl.errors import UserError
from pdctl.suggest.candidate import Candidate, Role
from pdctl.topology import build_topology
from pdctl.topology.placement import placement_problems

ROLE_KEYS_SET = ("tp", "dp", "enable_dp_attention", "pp", "replicas", "nodes")


def default_skeleton(*, name: str, system: str, gpus: int, gpus_per_node: int, model_path: str, preset: str,
                     version: str, backend: str) -> dict[str, Any]:
    """The topology data a suggestion starts from when the user gave no skeleton."""
    nodes = []
    left = gpus
    while left > 0:
        n = min(gpus_per_node, left)
        nodes.append({"name": f"n{len(nodes)}", "host": f"{system}-node-{len(nodes)}", "gpu": system, "gpus": n})
        left -= n
    return {
        "name": name,
        "engine": {"kind": "sglang", "version": version},
        "model": {"path": model_path, "preset": preset},
        "nodes": nodes,
        "transfer": {"backend": backend, "protocol": "rdma"},
        "server": {"page_size": 64},
        "prefill": {"nodes": [n["name"] for n in nodes]},
        "decode": {"nodes": [n["name"] for n in nodes]},
    }


def topology_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return (name or "suggested")[:60].strip("-")


EP_FLAGS = ("ep-size", "ep_size", "--ep-size", "expert-parallel-size", "expert_parallel_size",
            "--expert-parallel-size")
MRR_FLAGS = ("max-running-requests", "max_running_requests", "--max-running-requests")


def _role(base: dict[str, Any], role: Role, nodes: list[str], decode: bool,
          server_args: dict[str, Any]) -> dict[str, Any]:
    """One role of the candidate over the skeleton's role BASE (its other keys kept)."""
    out = {k: v for k, v in copy.deepcopy(base).items() if k not in ROLE_KEYS_SET}
    out.update({"nodes": nodes, "replicas": role.replicas, "tp": role.tp})
    if role.pp != 1:
        out["pp"] = role.pp
    if role.enable_dp_attention:
        out.update({"dp": role.dp, "enable_dp_attention": True})
    args = dict(out.get("args") or {})
    for flag in (*EP_FLAGS, *MRR_FLAGS):
        args.pop(flag, None)
    if role.ep > 1:
        args["ep-size"] = role.ep
    elif any(flag in server_args for flag in EP_FLAGS):
        args["ep-size"] = None  # the server-level EP is not this candidate's: switch it off for the role
    if decode and role.max_running_requests:
        args["max-running-requests"] = role.max_running_requests
    if args:
        out["args"] = args
    else:
        out.pop("args", None)
    return out


def node_orders(skeleton: dict[str, Any]) -> list[tuple[list[str], list[str]]]:
    """Node lists to try for (prefill, decode), best first: the skeleton's own, all nodes in order for both,
    all nodes with decode packed from the other end."""
    names = [n["name"] for n in skeleton.get("nodes") or []]
    own = ((skeleton.get("prefill") or {}).get("nodes") or names, (skeleton.get("decode") or {}).get("nodes") or names)
    orders = [(list(own[0]), list(own[1])), (names, names), (names, names[::-1])]
    out: list[tuple[list[str], list[str]]] = []
    for order in orders:
        if order not in out:
            out.append(order)
    return out


def candidate_data(skeleton: dict[str, Any], cand: Candidate) -> dict[str, Any]:
    """The topology data of CAND over SKELETON, with the first node order whose placement is sound."""
    first: dict[str, Any] | None = None
    for pre_nodes, dec_nodes in node_orders(skeleton):
        data = copy.deepcopy(skeleton)
        data["mode"] = "pd"
        server_args = (skeleton.get("server") or {}).get("args") or {}
        data["prefill"] = _role(skeleton.get("prefill") or {}, cand.prefill, pre_nodes, False, server_args)
        data["decode"] = _role(skeleton.get("decode") or {}, cand.decode, dec_nodes, True, server_args)
        first = first or data
        try:
            if not placement_problems(build_topology(data, source="<suggest candidate>")):
                return data
        except UserError:  # an invalid candidate topology is judged (and reported) by the caller
            return data
    assert first is not None
    return first


def prediction(cand: Candidate, *, isl: int, osl: int, ttft_ms: float, itl_ms: float, source: str) -> dict[str, Any]:
    """The `bench.predicted` section: the figures `pdctl bench serve` compares its measurement with."""
    doc = cand.to_dict()
    return {
        "source": source,
        "concurrency": doc["concurrency"], "isl": isl, "osl": osl,
        "ttft_ms": doc["ttft_ms"], "itl_ms": doc["itl_ms"],
        "output_tok_s": round(doc["tokens_per_s_per_gpu"] * cand.gpus, 3),
        "tokens_per_s_per_gpu": doc["tokens_per_s_per_gpu"],
        "request_rate": doc["request_rate"], "kv_transfer_ms": doc["kv_transfer_ms"],
        "gpus": cand.gpus, "targets": {"ttft_ms": ttft_ms, "itl_ms": itl_ms},
    }


def with_prediction(data: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """DATA with `bench.serve` set to the predicted point and `bench.predicted` recorded."""
    out = copy.deepcopy(data)
    bench = dict(out.get("bench") or {})
    serve = dict(bench.get("serve") or {})
    serve.update({"concurrency": [predicted["concurrency"]], "isl": [predicted["isl"]], "osl": [predicted["osl"]]})
    bench.update({"serve": serve, "predicted": predicted})
    out["bench"] = bench
    return out


def to_yaml(data: dict[str, Any], header: list[str]) -> str:
    """The topology file: HEADER as comments, then the document (keys in a person's reading order)."""
    order = ["name", "mode", "engine", "model", "nodes", "transfer", "server", "prefill", "decode", "router",
             "eval", "bench", "slurm"]
    ordered = {k: data[k] for k in order if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    body = yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, width=110)
    return "".join(f"# {line}\n" if line else "#\n" for line in header) + body
