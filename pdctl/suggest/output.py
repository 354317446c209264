"""`--out`: the best candidate as a complete topology file, its prediction recorded, checked after writing.

The file is the candidate's topology (pdctl.suggest.deployment) with `bench.serve` set to the predicted point
and `bench.predicted` holding the figures and the targets, so that `pdctl bench serve` on a launch of it shows
predicted against measured. It is loaded back and judged by check-compat before the command reports success:
a suggestion that would not pass check-compat is never handed out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed
from pdctl.suggest.deployment import candidate_data, prediction, to_yaml, with_prediction
from pdctl.suggest.judge import judge_topology
from pdctl.suggest.names import aic_version
from pdctl.topology import load_topology


def write_topology(result: Any, path: str) -> dict[str, Any]:
    """Write RESULT's best candidate to PATH; the `out` part of the JSON document."""
    inputs, best = result.inputs, result.candidates[result.best]
    meta = result.aic_meta
    source = (f"pdctl suggest: AIConfigurator {aic_version()} (SGLang perf data {meta.get('database')}) + KV "
              f"transfer ({inputs.link.source}) + check-compat (SGLang {inputs.version})")
    predicted = prediction(best, isl=inputs.isl, osl=inputs.osl, ttft_ms=inputs.ttft_ms, itl_ms=inputs.itl_ms,
                           source=source)
    data = with_prediction(candidate_data(inputs.skeleton, best), predicted)
    kv = best.kv
    header = [
        (f"Suggested by `pdctl suggest` for {inputs.model.preset} on {inputs.gpus} x {inputs.system}, ISL "
         f"{inputs.isl} / OSL {inputs.osl}, targets TTFT {inputs.ttft_ms:g} ms / ITL {inputs.itl_ms:g} ms."),
        (f"{best.label()}: predicted TTFT {best.ttft_ms:.1f} ms (AIConfigurator {best.row['ttft']:g} + KV "
         f"{kv.transfer_ms if kv else 0:.1f}), ITL {best.itl_ms:g} ms, {best.tokens_per_s_per_gpu:.1f} tok/s/GPU."),
        f"KV link: {inputs.link.source}. Hosts are placeholders where no skeleton named them: edit them.",
        "bench.predicted holds the prediction: `pdctl bench serve` on a launch of this file compares against it.",
        "",
    ]
    Path(path).write_text(to_yaml(data, header), encoding="utf-8")
    errors, _ = judge_topology(load_topology(path), inputs.spec)
    if errors:  # pdctl's own bug: the candidate passed, its file does not
        raise CheckFailed(f"the written topology {path} fails check-compat: " +
                          "; ".join(f"{e['rule']}: {e['message']}" for e in errors))
    return {"path": str(path), "name": data["name"], "predicted": predicted}
