"""check-compat's verdict for the topology a bench-transfer runs, on either stack: the gate before the run
(a rejected topology is refused unless --skip-compat) and the prediction the outcome is held against; and
`--stack pdctl` behind that gate (run_pdctl_bench).
"""

from __future__ import annotations

from typing import Any

from pdctl.bench.transfer.run import BenchConfig, run_bench
from pdctl.compat import evaluate
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.sglang_stack.verdict import Prediction, agrees, predict


def prediction(topo: Any) -> Prediction:
    """check-compat's findings for TOPO (its deployment, rendered as a launch renders it), as a rehearsal's
    prediction."""
    return predict(evaluate(render(topo), resolve_model_spec(topo.model, engine_kind=topo.engine.kind)))


def refusal(predicted: Prediction) -> str:
    """Why bench-transfer does not run a topology check-compat rejects (and how to run it anyway)."""
    failed = predicted.rules + predicted.not_rehearsed
    return ("check-compat rejects this topology (" + "; ".join(f"{f['rule']} [{f['stage']}]: {f['message']}"
            for f in failed) + "); --skip-compat runs it anyway, to see it fail live")


def run_pdctl_bench(topo: Any, cfg: BenchConfig, *, skip_compat: bool = False) -> dict[str, Any]:
    """`bench-transfer --stack pdctl`: check-compat's gate, then run_bench; the document gains CLI.md's
    round-3 keys (stack, verified, gbps/descriptors of SGLang's per-token path, stage, agreement)."""
    predicted = prediction(topo)
    common = {"stack": "pdctl", "transport": f"{cfg.backend} through pdctl's own endpoints (not recorded)",
              **predicted.to_dict()}
    if not predicted.compat_ok and not skip_compat:
        return {"ok": False, "topology": cfg.name, "backend": cfg.backend, "verified": False, "gbps": 0.0,
                "descriptors": 0, "stage": None, "error": refusal(predicted), "refused": True,
                "agrees_with_compat": None, **common}
    doc = run_bench(cfg)  # a transfer that fails raises CheckFailed (exit 1) with the backend's error
    token = doc["paths"]["per_token"]
    verified = bool(doc["ok"])
    stage = None if verified else "silent corruption"
    agreement = agrees(predicted, verified, stage)
    return doc | common | {"ok": verified and agreement, "verified": verified, "gbps": token["gbps"],
                           "descriptors": token["descriptors"], "stage": stage, "error": None,
                           "refused": False, "agrees_with_compat": agreement}
