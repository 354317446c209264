"""The model on every server node: the directory (or HF cache snapshot) exists, and its config.json gives the
same KV heads / head_dim / layers / layer types / window that check-compat used; a different config on one
node (another revision) is an error, because prefill and decode would lay out KV differently."""

from __future__ import annotations

from typing import Any

from pdctl.errors import UserError
from pdctl.models.hf_config import spec_from_config
from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.report import failed, passed

FIELDS = ("num_layers", "num_kv_heads", "head_dim", "layer_types", "sliding_window", "mla")


def shape(spec: Any) -> dict[str, Any]:
    """The fields of a ModelSpec that decide the KV layout (what must agree across nodes and with compat)."""
    return {f: getattr(spec, f) for f in FIELDS}


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    hashes: dict[str, str] = {}
    for name in ctx.servers():
        facts = ctx.fact(name, "model")
        where = ctx.fact(name, "model_repo") or ctx.topo.model.path
        if not facts:
            out.append((name, failed("model.path", f"{where} is not in this node's Hugging Face cache",
                                     expected=where, fix="download the model on this node (or share the cache) "
                                     "before launching: SGLang would try to download it at start")))
            continue
        reference = ctx.topo.engine.kind == "reference"
        create = f"create it on that node: `pdctl reference init-checkpoint {facts.get('path')}` (the reference " \
                 "engine's seeded checkpoint; the same seed writes the same weights everywhere)"
        if not facts.get("exists"):
            out.append((name, failed("model.path", f"model directory {facts['path']} does not exist on this node",
                                     expected=facts["path"], fix=create if reference else "copy the model to the "
                                     "same path on every node that runs a server, or use a shared filesystem")))
            continue
        if "config" not in facts:
            why = facts.get("config_error") or "no config.json"
            out.append((name, failed("model.config", f"{facts['path']}: {why}", fix=create if reference else
                                     "a model directory needs the model's config.json")))
            continue
        hashes[name] = facts.get("config_sha256", "")
        out.append((name, _compare(ctx, facts)))
    if len(set(hashes.values())) > 1:
        first = next(iter(hashes))
        for name, digest in hashes.items():
            if digest != hashes[first]:
                out.append((name, failed("model.same", f"config.json differs from node {first}'s (sha256 "
                                         f"{digest[:12]} vs {hashes[first][:12]}): another model or revision",
                                         found=digest[:12], expected=hashes[first][:12],
                                         fix="put the same model revision on every node")))
    return out


def _compare(ctx: Context, facts: dict[str, Any]):  # type: ignore[no-untyped-def]
    try:
        node_spec = spec_from_config(facts["config"], name=ctx.topo.model.path, source=facts["path"])
    except UserError as exc:
        return failed("model.config", f"{facts['path']}/config.json: {exc.message}")
    if ctx.spec is None:
        return passed("model.config", f"config.json read (check-compat could not resolve the model here: "
                      f"{ctx.spec_error})", shape(node_spec))
    have, want = shape(node_spec), shape(ctx.spec)
    diff = {k: (have[k], want[k]) for k in FIELDS if have[k] != want[k]}
    if diff:
        words = "; ".join(f"{k} {a!r} here vs {b!r}" for k, (a, b) in diff.items())
        return failed("model.config", f"config.json differs from what check-compat used ({ctx.spec.source}): "
                      f"{words}", found={k: a for k, (a, _) in diff.items()},
                      expected={k: b for k, (_, b) in diff.items()},
                      fix="point model.path/model.config at the model the nodes serve, and re-run check-compat")
    return passed("model.config", f"{ctx.spec.num_layers} layers, {ctx.spec.num_kv_heads} KV heads x "
                  f"{ctx.spec.head_dim}" + (f", window {ctx.spec.sliding_window}" if ctx.spec.sliding_window else ""),
                  shape(node_spec))
