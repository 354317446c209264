"""check-compat's verdict for the topology a bench-transfer runs, on either stack: the gate before the run
(a rejected topology is refused unless --skip-compat) and the prediction the outcome is held against.
"""

from __future__ import annotations

from typing import Any

from pdctl.transfer.sglang_stack.verdict import Prediction, predict


def prediction(topo: Any) -> Prediction:
    """check-compat's findings for TOPO, as a rehearsal's prediction."""
    from pdctl.compat import evaluate
    from pdctl.models import resolve_model_spec

    return predict(evaluate(topo, resolve_model_spec(topo.model, engine_kind=topo.engine.kind)))


def refusal(predicted: Prediction) -> str:
    """Why bench-transfer does not run a topology check-compat rejects (and how to run it anyway)."""
    failed = predicted.rules + predicted.not_rehearsed
    return ("check-compat rejects this topology (" + "; ".join(f"{f['rule']} [{f['stage']}]: {f['message']}"
            for f in failed) + "); --skip-compat runs it anyway, to see it fail live")
