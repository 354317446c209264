"""`pdctl launch` of a sweep: every variant judged by check-compat before anything starts or is submitted, then
one run per valid variant in `<run-dir>/<variant>` (Slurm: one job each), in the sweep's order.

A variant that fails check-compat (or whose values make the topology invalid) stops the launch before anything
is submitted, unless `--keep-going`: then only the valid variants run, and a variant whose launch fails does
not stop the others. `pdctl runs` lists every variant's run (state.json records the variant).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.compat import compat_report
from pdctl.compat.sweeps import failed_rules, sweep_report
from pdctl.errors import CheckFailed, UserError
from pdctl.launch.deploy import launch
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.runs import default_run_dir

if TYPE_CHECKING:
    from pdctl.launch.deploy import LaunchHooks, LaunchOptions
    from pdctl.topology import Topology
    from pdctl.topology.variants import SweepLoad

COMPAT_TOKENS = 8192  # check-compat's default prompt length


def compat_of(topo: Topology, tokens: int = COMPAT_TOKENS) -> dict[str, Any]:
    """check-compat's document for TOPO, over its deployment rendered once."""
    return compat_report(render(topo), resolve_model_spec(topo.model, engine_kind=topo.engine.kind), tokens)


@dataclass(frozen=True)
class VariantRun:
    """One variant of a sweep launch: its verdict, and what its launch did (or why it did not run)."""

    name: str
    overrides: dict[str, Any]
    ok: bool
    failed_rules: list[str]
    run_dir: Path
    outcome: str  # skipped (failed check-compat) | dry-run | submitted | running | failed
    detail: str = ""
    job_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "overrides": self.overrides, "ok": self.ok, "failed_rules": self.failed_rules,
                "run_dir": str(self.run_dir), "outcome": self.outcome, "detail": self.detail, "job_id": self.job_id}


def launch_sweep(load: SweepLoad, options: LaunchOptions, hooks: LaunchHooks, *,
                 keep_going: bool) -> list[VariantRun]:
    """Judge every variant of LOAD, then launch the valid ones (see the module docstring)."""
    if options.in_allocation:
        raise UserError("a sweep launches one run per variant: it takes no --in-allocation (the job of each "
                        "variant runs its own)")
    if not options.detach and not options.dry_run and len(load.variants) > 1:
        raise UserError("a sweep launches its variants one after another: add --detach (or --dry-run), or launch "
                        "one variant: --set sweep=null --set KEY=VALUE ...")
    doc = sweep_report(load, compat_of)
    first = next(v.topology for v in load.variants if v.topology is not None)
    base = Path(options.run_dir) if options.run_dir is not None else default_run_dir(first.name)
    bad = [v for v in doc["variants"] if not v["ok"]]
    if bad and not keep_going and not options.skip_compat:
        lines = [f"- {v['name']}: {', '.join(failed_rules(v['findings']))}" for v in bad]
        raise CheckFailed(f"{first.name}: {len(bad)} of {len(doc['variants'])} variant(s) fail check-compat; nothing "
                          "was launched (--keep-going launches the others; `pdctl check-compat` says why):",
                          detail="\n".join(lines))
    out: list[VariantRun] = []
    for item, verdict in zip(load.variants, doc["variants"]):
        run_dir = base / item.variant.name
        entry = VariantRun(item.variant.name, verdict["overrides"], verdict["ok"], failed_rules(verdict["findings"]),
                           run_dir, "skipped")
        if item.topology is None or (not verdict["ok"] and not options.skip_compat):
            out.append(replace(entry, detail="fails check-compat"))
            continue
        try:
            done = launch(item.topology, replace(options, run_dir=run_dir), hooks)
        except (CheckFailed, UserError) as exc:
            if not keep_going:
                raise
            out.append(replace(entry, outcome="failed", detail=exc.message))
            continue
        job_id = (done.state or {}).get("job_id")
        out.append(replace(entry, outcome=done.outcome, job_id=str(job_id) if job_id is not None else None))
    return out
