"""`pdctl bench-transfer --stack sglang`: one request's KV moved by SGLang's own KV managers, senders, receivers
and bootstrap server, between two processes on this machine, at the topology's shapes (docs/sglang-stack.md).

The work happens in SGLang's interpreter (pdctl.sglang_stack); this module resolves the topology into
the two sides, asks check-compat what it predicts for them, runs the rounds (each interleaved with a memcpy of
the same bytes, as pdctl's own bench does), and writes the document: verified or SGLang's failure with the
stage it happened at, and whether that is what check-compat said.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pdctl.bench.transfer.prediction import prediction, refusal
from pdctl.bench.transfer.run import available_memory, memcpy_gbps, request_bytes
from pdctl.errors import UserError
from pdctl.preflight.parsers.mooncake_log import parse_mooncake_log
from pdctl.preflight.parsers.ucx_proto import write_path
from pdctl.render.transfer import transfer_env
from pdctl.sglang_stack.launcher import StackUnavailable, find_interpreter
from pdctl.sglang_stack.pools import request_shape
from pdctl.sglang_stack.rehearsal import Rehearsal
from pdctl.sglang_stack.sides import DEFAULT_TIMEOUT_S, device_for, side_specs
from pdctl.sglang_stack.spec import SideSpec
from pdctl.sglang_stack.verdict import Prediction, agrees
from pdctl.transfer import registry

# Copies of the request's KV both drivers hold at their peak: prefill pools and its seeded global KV,
# decode pools, its global KV and the expected bytes it checks against, and slack for SGLang's own buffers.
COPIES_AT_PEAK = 7


def check_memory(pre: SideSpec, dec: SideSpec) -> None:
    """Refuse (exit 2) a request whose pools cannot fit this host's memory, before starting anything."""
    one = max(request_bytes(request_shape(pre)), request_bytes(request_shape(dec)))
    need, have = COPIES_AT_PEAK * one, available_memory()
    if have is not None and need > have:
        raise UserError(f"--tokens {pre.tokens}: the SGLang-stack bench would need about {need / 2**30:.1f} GiB "
                        f"of host memory ({COPIES_AT_PEAK} copies of the request's {one / 2**30:.2f} GiB of KV); "
                        f"{have / 2**30:.1f} GiB are available")


def transport(backend: str, log: str) -> str:
    """What carried the bytes, from the prefill driver's log, read as the backend's registry entry says its log
    tells the path: UCX's write path (NIXL) or Mooncake's transport lines."""
    if registry.backend(backend).path_log == "ucx":
        path = write_path(log)
        return f"ucx {path.describe()}" if path else "ucx (no protocol table printed)"
    kinds = {s.transport for s in parse_mooncake_log(log) if s.transport}
    return "mooncake " + ("/".join(sorted(kinds)) if kinds else "(transport not logged)")


def run_sglang_bench(topo: Any, *, backend: str | None, tokens: int, repeats: int = 3,
                     skip_compat: bool = False, timeout: float = DEFAULT_TIMEOUT_S,
                     interpreter: Any = None, progress: Any = None) -> dict[str, Any]:
    """The bench on SGLang's stack; returns the JSON document (CLI.md round 3). Raises UserError for bad
    input or no SGLang interpreter; a failed or refused transfer is a document with ok false."""
    if repeats < 1:
        raise UserError(f"--repeats must be positive, got {repeats}")
    pre, dec = side_specs(topo, backend=backend, tokens=tokens, timeout=timeout)
    predicted = prediction(topo)
    doc = _skeleton(topo, pre, dec, predicted)
    if not predicted.compat_ok and not skip_compat:
        doc.update(error=refusal(predicted), refused=True)
        return doc
    check_memory(pre, dec)
    if interpreter is None:
        try:
            interpreter = find_interpreter(pre.backend, topo.engine.version if topo.engine.kind == "sglang"
                                           else None, explicit=named_python(topo))
        except StackUnavailable as exc:
            raise UserError(f"{exc}: build SGLang's side environment (`make sglang-env`) or point "
                            "PDCTL_SGLANG_PYTHON at a Python with sglang and the backend's library") from None
    if progress:
        progress(f"starting SGLang {interpreter.sglang} in {interpreter.python} (prefill and decode drivers)")
    # the transfer path's environment a launch gives prefill (UCX_TLS for `transfer.protocol: tcp`), the
    # user's env over it, as preflight's transfer test on this stack does
    env = {**transfer_env(topo, False, "prefill"), **topo.env_of("prefill")}
    rehearsal = Rehearsal(interpreter, timeout=timeout, env=env)
    try:
        doc["sglang_version"] = rehearsal.sglang
        if device_for(topo, rehearsal) == "cuda":
            pre, dec = replace(pre, device="cuda"), replace(dec, device="cuda")
            doc["memory"] = "VRAM"
        setup = rehearsal.setup(pre, dec)
        runs: list[dict[str, Any]] = []
        copies: list[float] = []
        if setup["ok"]:
            for round_ in range(repeats):
                if progress:
                    progress(f"round {round_ + 1}/{repeats}: one request of {tokens} tokens through SGLang's stack")
                nbytes = int(setup["decode"].get("bytes") or 1)
                copies.append(memcpy_gbps(nbytes))
                runs.append(rehearsal.transfer(setup["case"], room=1000 + round_))
                copies.append(memcpy_gbps(nbytes))
                if not runs[-1]["verified"]:
                    break
        else:
            runs.append({"verified": False, "stage": setup["stage"], "error": f"{setup['side']}: {setup['error']}",
                         "bytes": 0, "descriptors": 0, "seconds": 0.0, "bypasses": []})
        doc["transport"] = transport(pre.backend, rehearsal.prefill.stderr_text())
    finally:
        rehearsal.close()
    return _finish(doc, runs, copies, predicted)


def named_python(topo: Any) -> str | None:
    """The interpreter the topology names (engine.python, unless it is the bare default): the only one tried
    then; else SGLang's side environment is looked for (pdctl.sglang_stack.launcher)."""
    python = topo.engine.python
    return None if python in ("python", "python3") else python


def _skeleton(topo: Any, pre: SideSpec, dec: SideSpec, predicted: Prediction) -> dict[str, Any]:
    return {"ok": False, "stack": "sglang", "topology": topo.name, "backend": pre.backend, "tokens": pre.tokens,
            "prefill_tp": pre.tp, "decode_tp": dec.tp, "page_size": pre.page_size, "kv_heads": pre.kv_heads,
            "head_dim": pre.head_dim, "elem_bytes": pre.elem_bytes, "full_layers": len(pre.full_layers),
            "swa_layers": len(pre.swa_layers), "linear_layers": len(pre.linear_layers),
            "state_bytes": 0, "memory": "VRAM" if pre.device == "cuda" else "DRAM",
            "sglang_version": None, "verified": False, "gbps": 0.0, "seconds": 0.0, "bytes": 0, "descriptors": 0,
            "transport": None, "stage": None, "error": None, "refused": False, "guards_bypassed": [],
            "agrees_with_compat": None, **predicted.to_dict()}


def _finish(doc: dict[str, Any], runs: list[dict[str, Any]], copies: list[float],
            predicted: Prediction) -> dict[str, Any]:
    verified = bool(runs) and all(r["verified"] for r in runs)
    last_failed = next((r for r in runs if not r["verified"]), None)
    timed = [r for r in runs if r["verified"] and r["seconds"] > 0]
    best = min(timed, key=lambda r: r["seconds"]) if timed else (runs[-1] if runs else {})
    seconds = float(best.get("seconds") or 0.0)
    nbytes = int(best.get("bytes") or 0)
    gbps = nbytes / seconds / 1e9 if seconds > 0 and verified else 0.0
    copy = max(copies) if copies else 0.0
    stage = last_failed["stage"] if last_failed else None
    doc.update({
        "verified": verified, "stage": stage, "error": last_failed["error"] if last_failed else None,
        "seconds": seconds, "bytes": nbytes, "state_bytes": int(best.get("state_bytes") or 0), "descriptors": int(best.get("descriptors") or 0), "gbps": gbps,
        "memcpy_gbps": copy, "ratio_to_memcpy": gbps / copy if copy else 0.0,
        "runs_seconds": [r["seconds"] for r in runs], "repeats": len(runs),
        "guards_bypassed": sorted({b for r in runs for b in r.get("bypasses", [])}),
        "agrees_with_compat": agrees(predicted, verified, stage),
        "mismatched_bytes": max((int(r.get("mismatched_bytes") or 0) for r in runs), default=0),
        "measured_at": time.time(),
    })
    doc["ok"] = verified and doc["agrees_with_compat"]
    return doc
