"""AIConfigurator (NVIDIA, Apache-2.0) wrapped: its worker model and its rate matching, every pair it matched.

Why wrapped and not re-implemented: AIConfigurator's numbers come from per-kernel measurements of each GPU
(its perf database); pdctl keeps them as they are and changes only what pdctl knows better (SGLang's rules, the
KV transfer). Its public answer (`cli_default`) is a handful of top rows, and for SGLang it forces prefill TP ==
decode TP. So pdctl drives the same sweep AIConfigurator's `Task.run` drives — `Task.sweep_disagg_kwargs` into
`sweep.sweep_disagg`, with AIConfigurator's own TPOT constraint list (the "pareto sweep") — and changes two
things, both scoped to the call:
- the same-TP gate is a parameter of that call (`require_same_tp`, filled by `Task._require_same_tp_gate`):
  pdctl passes False where the SGLang release runs heterogeneous TP (pdctl's rules judge every pair after);
- `sweep._rate_match_dict`, the function that turns one (prefill worker, count, decode worker, count) into a
  row, is wrapped to record EVERY row it returns, not only the best per decode category, and
  `sweep._get_disagg_worker_candidates` (the expensive per-worker model) to record and replay its frames.
Rows are rounded as AIConfigurator rounds its own result (3 decimals), so a same-TP row is bit for bit the
figure `aiconfigurator cli default` prints. tests/suggest/test_aic.py breaks if any of these hooks move.
aiconfigurator and pandas are imported only here, only when a sweep is not in the cache.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pdctl.suggest import cache as cache_mod
from pdctl.suggest.names import aic_version

# The row columns pdctl keeps (AIConfigurator's ColumnsDisagg names); the rest are repeated per row (model,
# backend, quant modes), kept once in `meta`.
ROW_COLUMNS = (
    "concurrency", "request_rate", "(p)bs", "(p)global_bs", "(p)workers", "(d)bs", "(d)global_bs", "(d)workers",
    "ttft", "tpot", "request_latency", "seq/s", "seq/s/gpu", "tokens/s", "tokens/s/gpu", "tokens/s/user",
    "(p)seq/s/worker", "(d)seq/s/worker", "num_total_gpus",
    "(p)tp", "(p)pp", "(p)dp", "(p)moe_tp", "(p)moe_ep", "(p)cp", "(p)memory",
    "(d)tp", "(d)pp", "(d)dp", "(d)moe_tp", "(d)moe_ep", "(d)memory",
)
META_COLUMNS = ("model", "isl", "osl", "(p)backend", "(p)version", "(p)system", "(p)gemm", "(p)kvcache",
                "(p)fmha", "(p)moe", "(p)comm")


@dataclass(frozen=True)
class AicQuery:
    """What decides AIConfigurator's numbers: the model, the GPU system, the GPU budget, the request shape."""

    model_path: str  # AIConfigurator's model id, e.g. openai/gpt-oss-120b
    system: str  # AIConfigurator's system name, e.g. gb300, h100_sxm
    gpus: int
    isl: int
    osl: int

    def key(self) -> dict[str, Any]:
        return {"aiconfigurator": aic_version(), "model": self.model_path, "system": self.system, "backend": "sglang",
                "backend_version": "default", "gpus": self.gpus, "isl": self.isl, "osl": self.osl}


@dataclass
class AicRows:
    """Every rate-matched (prefill, decode) row AIConfigurator produced, deduplicated; `meta` says how."""

    columns: list[str]
    rows: list[list[Any]]
    meta: dict[str, Any] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows, "meta": self.meta}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> AicRows:
        return cls(list(doc["columns"]), [list(r) for r in doc["rows"]], dict(doc.get("meta") or {}))


class AicFailed(Exception):
    """AIConfigurator found nothing to offer: KIND "memory" (the model fits in no worker of the GPU budget) or
    "none" (no parallel layout produced a worker, e.g. no perf data for it)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """AIConfigurator logs a warning per parallel config it skips and a deprecation notice per entry point, and
    some of its notes go to stdout: keep all of that out of pdctl's output (stdout may carry `--json -`)."""
    log = logging.getLogger("aiconfigurator")
    core = logging.getLogger("aiconfigurator_core")
    levels = log.level, core.level
    log.setLevel(logging.ERROR)
    core.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        log.setLevel(levels[0])
        core.setLevel(levels[1])


@contextlib.contextmanager
def recording(sweep_mod: Any, frames: dict[str, Any], recorded: list[dict[str, Any]]) -> Iterator[None]:
    """Within the block, AIConfigurator's sweep replays worker frames found in FRAMES (and stores the ones it
    computes there) and appends every rate-matched row to RECORDED. Restored on exit, also on error."""
    compute, rate_match = sweep_mod._get_disagg_worker_candidates, sweep_mod._rate_match_dict

    def workers(**kwargs: Any) -> Any:
        role = kwargs["role"]
        if role not in frames:
            frames[role] = compute(**kwargs)
        return frames[role]

    def matched(*args: Any, **kwargs: Any) -> dict[str, Any]:
        row = rate_match(*args, **kwargs)
        recorded.append(row)
        return row

    sweep_mod._get_disagg_worker_candidates, sweep_mod._rate_match_dict = workers, matched
    try:
        yield
    finally:
        sweep_mod._get_disagg_worker_candidates, sweep_mod._rate_match_dict = compute, rate_match


def build_task(query: AicQuery, ttft: float, tpot: float) -> Any:
    """AIConfigurator's own disagg Task for these inputs, built as `aiconfigurator cli default` builds it."""
    from aiconfigurator.cli.main import build_default_tasks

    return build_default_tasks(model_path=query.model_path, total_gpus=query.gpus, system=query.system,
                               backend="sglang", isl=query.isl, osl=query.osl, ttft=ttft, tpot=tpot,
                               serving_mode="disagg")["disagg"]


def sweep_kwargs(task: Any, frames: dict[str, Any], *, lift_gate: bool) -> dict[str, Any]:
    """The kwargs `Task.run` gives `sweep_disagg` (databases loaded only when a worker frame is still missing),
    with the same-TP gate lifted when LIFT_GATE."""
    need_db = not {"prefill", "decode"} <= set(frames)
    pdb = task._load_database(task.prefill_system_name, task.prefill_backend_name,
                              task.prefill_backend_version) if need_db else None
    ddb = task._load_database(task.decode_system_name, task.decode_backend_name,
                              task.decode_backend_version) if need_db else None
    kwargs = task.sweep_disagg_kwargs(prefill_database=pdb, decode_database=ddb)
    if lift_gate:
        kwargs["require_same_tp"] = False
    return kwargs


def rows_of(recorded: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]], dict[str, Any]]:
    """(ROW_COLUMNS, rows, meta) of recorded rate-matched rows (deduplicated, rounded as AIConfigurator does)."""
    rows, meta = _rows(recorded)
    return list(ROW_COLUMNS), rows, meta


def _rows(recorded: list[dict[str, Any]]) -> tuple[list[list[Any]], dict[str, Any]]:
    """Recorded rows -> deduplicated value lists of ROW_COLUMNS, rounded as AIConfigurator rounds its result."""
    import pandas as pd
    from aiconfigurator.sdk import common

    if not recorded:
        return [], {}
    df = pd.DataFrame(recorded, columns=list(common.ColumnsDisagg)).round(3)  # = _find_best_disagg_under_...
    meta = {c: _native(df[c].iloc[0]) for c in META_COLUMNS if c in df.columns}
    kept = df[list(ROW_COLUMNS)].drop_duplicates().reset_index(drop=True)
    return [[_native(v) for v in row] for row in kept.itertuples(index=False, name=None)], meta


def picked(task: Any, df: Any, top_n: int = 5) -> list[dict[str, Any]]:
    """What `aiconfigurator cli default` prints for a sweep result DF: its picking (pick_default, under the
    task's TPOT target) over it, top N rows with its tokens/s/gpu_cluster."""
    from aiconfigurator.cli.utils import process_experiment_result

    if df is None or len(df) == 0:
        return []
    best = process_experiment_result(task, {"pareto_df": df}, top_n=top_n)[0]
    cols = [c for c in (*ROW_COLUMNS, "tokens/s/gpu_cluster") if c in best.columns]
    return [{c: _native(v) for c, v in zip(cols, row)} for row in best[cols].itertuples(index=False, name=None)]


def _native(value: Any) -> Any:
    """numpy/pandas scalars -> Python ones (JSON, exact float round trip)."""
    return value.item() if hasattr(value, "item") else value


def run_sweep(query: AicQuery, *, ttft: float, tpot: float, lift_gate: bool,
              store: cache_mod.Cache | None = None) -> AicRows:
    """Every row of AIConfigurator's disagg sweep for QUERY under a TTFT budget of TTFT ms (its own prefill
    filter) over its TPOT constraint list, the gate lifted or not. Cached (worker frames and rows) in STORE.

    The ITL target TPOT is not part of the key: the sweep's constraints are AIConfigurator's own list
    (`Task.pareto_sweep`, always on in `cli default`), whatever the target; only its picking (`own_answer`)
    reads the target. `meta["sweep"]` keeps the sweep's own result for that picking."""
    row_key = {**query.key(), "ttft_budget": ttft, "gate": "lifted" if lift_gate else "aiconfigurator",
               "format": cache_mod.FORMAT}
    if store is not None:
        hit = store.get("rows", row_key)
        if isinstance(hit, dict) and "failed" in hit:  # AIConfigurator's verdict is as deterministic as its rows
            raise AicFailed(hit["failed"]["kind"], hit["failed"]["message"])
        if hit is not None:
            rows = AicRows.from_json(hit)
            rows.meta["cached"] = True
            return rows
    from aiconfigurator.sdk import sweep as sweep_mod

    frames = store.get_frames(query.key()) if store is not None else {}
    had_frames = bool(frames)
    from aiconfigurator.sdk.errors import InsufficientMemoryError

    recorded: list[dict[str, Any]] = []
    with quiet():
        task = build_task(query, ttft, tpot)
        started = time.perf_counter()
        cpu = time.process_time()
        if not had_frames:
            task.validate()
        kwargs = sweep_kwargs(task, frames, lift_gate=lift_gate)
        try:
            with recording(sweep_mod, frames, recorded):
                df = sweep_mod.sweep_disagg(**kwargs, predictor=task.predictor,
                                            speculative_profile=task.build_speculative_profile())
        except (InsufficientMemoryError, RuntimeError) as exc:  # RuntimeError: its "no results" family
            failed = AicFailed("memory" if isinstance(exc, InsufficientMemoryError) else "none", str(exc))
            if store is not None:
                store.put("rows", row_key, {"failed": {"kind": failed.kind, "message": failed.message}})
            raise failed from None
        if not task.pareto_sweep:  # the key above would be wrong: the constraints would be the target
            raise AicFailed("none", "AIConfigurator's task does not sweep its TPOT list (pareto_sweep off)")
        rows, meta = _rows(recorded)
        meta["sweep"] = cache_mod.frame_to_json(df)
    meta.update({"aiconfigurator": aic_version(), "database": task.prefill_backend_version,
                 "gate": row_key["gate"], "ttft_budget": ttft, "tpot_constraints": len(kwargs["runtime_config"].tpot)
                 if isinstance(kwargs["runtime_config"].tpot, list) else 1,
                 "workers_cached": had_frames, "wall_s": round(time.perf_counter() - started, 2),
                 "cpu_s": round(time.process_time() - cpu, 2), "recorded": len(recorded)})
    result = AicRows(list(ROW_COLUMNS), rows, meta)
    if store is not None:
        if not had_frames:
            store.put_frames(query.key(), frames)
        store.put("rows", row_key, result.to_json())
    result.meta["cached"] = False
    return result


def own_answer(query: AicQuery, *, ttft: float, tpot: float, store: cache_mod.Cache | None = None,
               top_n: int = 5) -> list[dict[str, Any]]:
    """AIConfigurator's own answer for these inputs: its gate, its sweep, its picking under the TPOT target —
    what `aiconfigurator cli default` prints for the disaggregated mode (rows with tokens/s/gpu_cluster)."""
    rows = run_sweep(query, ttft=ttft, tpot=tpot, lift_gate=False, store=store)
    with quiet():
        return picked(build_task(query, ttft, tpot), cache_mod.frame_from_json(rows.meta["sweep"]), top_n)
