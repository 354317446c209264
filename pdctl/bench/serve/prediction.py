"""Predicted against measured: a topology's `bench.predicted` (written by `pdctl suggest --out`) next to what
`pdctl bench serve` measured at the same point.

Why: a suggestion is a model's claim (AIConfigurator's per-kernel figures plus pdctl's KV term); the only way to
know what it is worth on a cluster is to hold it against a measurement of the deployment it produced. The
comparison is informational: it never changes the bench's verdict (the targets do not gate it), but says
whether the measured medians meet the targets the deployment was chosen for.
"""

from __future__ import annotations

import math
from typing import Any

from pdctl.bench.serve.metrics import PointMetrics


def _ratio(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or not math.isfinite(measured) or not predicted:
        return None
    return measured / predicted


def compare(predicted: Any, points: list[PointMetrics]) -> dict[str, Any] | None:
    """The JSON `prediction` section: the predicted figures, the measured ones at the predicted point
    (None when the sweep did not measure that point), measured / predicted, and the targets met or not."""
    if predicted is None:
        return None
    doc: dict[str, Any] = {
        "source": predicted.source,
        "point": {"concurrency": predicted.concurrency, "isl": predicted.isl, "osl": predicted.osl},
        "predicted": {"ttft_ms": predicted.ttft_ms, "itl_ms": predicted.itl_ms,
                      "output_tok_s": predicted.output_tok_s, "kv_transfer_ms": predicted.kv_transfer_ms},
        "targets": predicted.targets.model_dump() if predicted.targets else None,
        "measured": None, "ratio": None, "targets_met": None,
    }
    key = (predicted.concurrency, predicted.isl, predicted.osl)
    m = next((p for p in points if p.point.key == key), None)
    if m is None:
        doc["note"] = (f"the sweep did not measure the predicted point (concurrency {key[0]}, isl {key[1]}, osl "
                       f"{key[2]}): run it with --concurrency {key[0]} --isl {key[1]} --osl {key[2]}")
        return doc
    measured = {"ttft_ms": m.value("ttft_ms.p50"), "itl_ms": m.value("itl_ms.p50"), "output_tok_s": m.output_tok_s}
    doc["measured"] = measured
    doc["ratio"] = {k: _ratio(measured[k], doc["predicted"][k]) for k in measured}
    if predicted.targets is not None:
        doc["targets_met"] = {
            "ttft_ms": measured["ttft_ms"] is not None and measured["ttft_ms"] <= predicted.targets.ttft_ms,
            "itl_ms": measured["itl_ms"] is not None and measured["itl_ms"] <= predicted.targets.itl_ms,
        }
    return doc
