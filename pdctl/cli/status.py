"""`pdctl status [--watch]`: option parsing and printing only (health and figures: pdctl.launch.status,
the metrics maths: pdctl.metrics)."""

from __future__ import annotations

from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import FiniteFloatRange, json_option, run_dir_option

DASH = "—"
MARKS = {"hung": "[red]hung[/]", "exited": "[red]exited[/]", "recovering": "[yellow]recovering[/]"}


@click.command("status")
@run_dir_option
@click.option("--watch", "-w", is_flag=True,
              help="Live view of every process and the router (requests/s, tokens/s, queue, KV usage, TTFT and "
                   "ITL percentiles over the last interval, transfer failures) until Ctrl-C.")
@click.option("--interval", type=FiniteFloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between refreshes of --watch.")
@click.option("--stall-after", type=FiniteFloatRange(min=1.0), default=60.0, show_default=True,
              help="--watch: seconds KV transfers may not move (requests in transfer, none completing; or the "
                   "transfer queue growing while KV use stays flat) before an alarm.")
@json_option("the status document (with --watch: rewritten every refresh; '-' = one JSON line per refresh)")
def status(run_dir: str | None, watch: bool, interval: float, stall_after: float, json_path: str | None) -> None:
    """Health of every process of a run and of the router, with their metrics (exit 1 if any is unhealthy).

    With --watch: the live metrics view, refreshed every --interval seconds; Ctrl-C ends it (exit 0)."""
    if watch:
        _watch(run_dir, interval, stall_after, json_path)
        return
    from rich.table import Table

    from pdctl.errors import CheckFailed
    from pdctl.launch.status import status as run_status

    doc = run_status(run_dir)
    out = err_console if json_path == "-" else console
    out.print(process_table(doc, Table))
    rows = [(p.get("name", "router"), p.get("node", ""), p.get("metrics"), p.get("metrics_error"))
            for p in [*doc["processes"], doc["router"]] if p.get("alive")]
    if rows:
        out.print(figures_table(rows, "metrics since start (pdctl status --watch: live)"))
    for p in doc["processes"]:
        if p.get("transfer_path"):
            out.print(f"KV path of {p['name']} ({p['node']}): {p['transfer_path']}", highlight=False)
    for p in doc["processes"]:
        kv = p.get("kv_capacity")
        if kv:
            color = {"agrees": "green", "differs": "yellow"}.get(kv["verdict"], "dim")
            out.print(f"KV capacity of {p['name']}: [{color}]{kv['verdict']}[/] — {kv['detail']}", highlight=False)
    for line in [*bottleneck_lines(doc.get("bottleneck")), *gpu_lines(doc.get("gpus") or {})]:
        out.print(line, highlight=False)
    for note in doc.get("numerics_notes") or []:
        out.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    write_json(json_path, doc)
    if not doc["ok"]:
        if doc.get("state") == "stopped":
            raise CheckFailed(f"run {doc['run_dir']} was stopped (pdctl down); nothing of it is running")
        bad = [p.get("name", "router") for p in [*doc["processes"], doc["router"]] if not p.get("healthy")]
        raise CheckFailed(f"not healthy: {', '.join(bad)}")


# the columns of the process table before `healthy` and `detail`: (header, the entry's value); pods have no
# pid, and their URLs are cluster DNS names as long as the row: pod, the node the scheduler chose, restarts
PROCESS_COLUMNS = (("process", lambda p: p.get("name", "router")), ("node", lambda p: p.get("node", "")),
                   ("pid", lambda p: str(p.get("pid"))), ("url", lambda p: p.get("url") or ""),
                   ("advertises", lambda p: p.get("advertise") or ""))
POD_COLUMNS = (("process", lambda p: p.get("name", "router")), ("pod", lambda p: p.get("pod") or ""),
               ("k8s node", lambda p: p.get("k8s_node") or ""), ("restarts", lambda p: str(p.get("restarts", ""))))


def process_table(doc: dict[str, Any], table_type: Any) -> Any:
    """One row per process and the router: who, where, healthy, and the detail (folded, never squeezed out)."""
    entries = [*doc["processes"], doc["router"]]
    columns = POD_COLUMNS if any(p.get("pod") for p in entries) else PROCESS_COLUMNS
    table = table_type(title=f"{doc['topology']} — {doc['run_dir']}")
    for header, _ in columns:
        table.add_column(header, overflow="fold")
    table.add_column("healthy", no_wrap=True)
    table.add_column("detail", overflow="fold", ratio=1, min_width=24)
    for p in entries:
        mark = MARKS.get(str(p.get("state")), "[green]yes[/]" if p.get("healthy") else "[red]no[/]")
        table.add_row(*(value(p) for _, value in columns), mark, str(p.get("detail", "")))
    return table


def _watch(run_dir: str | None, interval: float, stall_after: float, json_path: str | None) -> None:
    """Refresh until Ctrl-C: a live table on a terminal, one table per refresh otherwise; with --json, the
    latest document in PATH (or one JSON line per refresh on stdout). Ctrl-C is the normal end: exit 0,
    as `pdctl logs --follow`."""
    import json
    import sys
    import time

    from pdctl.launch.status import live, run_gpus, run_watch
    from pdctl.liveness import HealthClock
    from pdctl.metrics.alarms import StallDetector
    from pdctl.runs import read_state, resolve_run_dir

    path = resolve_run_dir(run_dir)
    state = read_state(path)
    watch = run_watch(path, state)
    detector = StallDetector(stall_after)
    clock = HealthClock()  # since when each process has not answered, across refreshes
    gpus = run_gpus(path, state)
    history: list[Any] = []  # the bottleneck verdict's window of samples
    out = err_console if json_path == "-" else console
    view: Any = None
    try:
        while True:
            doc = live(path, state, watch, detector, clock, gpus, history)
            table = live_view(doc, interval)
            if out.is_terminal:
                if view is None:
                    from rich.live import Live

                    view = Live(table, console=out, auto_refresh=False, redirect_stdout=False,
                                redirect_stderr=False)
                    view.__enter__()
                view.update(table, refresh=True)
            else:  # a log or a pipe: no terminal width to fit, keep every column readable
                _wide(out).print(table)
            if json_path == "-":
                sys.stdout.write(json.dumps(doc) + "\n")
                sys.stdout.flush()
            else:
                write_json(json_path, doc)
            time.sleep(interval)  # the refresh period (Ctrl-C interrupts it)
    except KeyboardInterrupt:
        pass
    finally:
        if view is not None:
            view.__exit__(None, None, None)


def _wide(out: Any) -> Any:
    """A console on OUT's stream at least 160 columns wide (rich assumes 80 when it is not a terminal)."""
    from rich.console import Console

    return Console(file=out.file, width=max(out.width, 160), highlight=False)


def live_view(doc: dict[str, Any], interval: float) -> Any:
    """The --watch table of one refresh, with its alarms (red) under it."""
    from rich.console import Group
    from rich.text import Text

    alarms = [Text(f"ALARM {a['process']}: {a['message']}", style="bold red") for a in doc.get("alarms", [])]
    gpus = [Text.from_markup(line) for line in gpu_lines(doc.get("gpus") or {})]
    verdict = [Text.from_markup(line) for line in bottleneck_lines(doc.get("bottleneck"))]
    return Group(live_table(doc, interval), *verdict, *gpus, *alarms)


def bottleneck_lines(verdict: dict[str, Any] | None) -> list[str]:
    """The bottleneck verdict and its evidence (pdctl.metrics.bottleneck)."""
    if not verdict:
        return []
    name = verdict["verdict"]
    color = "yellow" if name.endswith("-bound") else "dim" if name == "not enough data" else "green"
    who = f" ({verdict['role']})" if verdict.get("role") else ""
    lines = [f"bottleneck: [{color}]{name}[/]{who} over {verdict.get('samples', 0)} sample(s)"]
    lines += [f"  - {e}" for e in verdict.get("evidence") or []]
    for role, r in (verdict.get("roles") or {}).items():
        if r["verdict"] != name:
            lines.append(f"  {role}: {r['verdict']}" + (f" — {'; '.join(r['evidence'])}" if r["evidence"] else ""))
    return lines


def gpu_lines(gpus: dict[str, dict[str, Any]]) -> list[str]:
    """One line per node: its GPUs' figures and where they came from, or why none were seen."""
    if not gpus:
        return []
    lines = []
    for node, doc in gpus.items():
        s = doc.get("summary")
        if not doc.get("source") or not s:
            lines.append(f"GPUs on {node}: none seen — {doc.get('why') or 'no telemetry'}")
            continue
        parts = [f"{s['devices']} device(s)" + (f" ({s['mig_instances']} MIG)" if s.get("mig_instances") else "")]
        if s.get("util_pct_mean") is not None:
            parts.append(f"util {s['util_pct_mean']:.0f}% (max {s['util_pct_max']:.0f}%)")
        for key, label in (("engine_active_mean", "engine active"), ("tensor_active_mean", "tensor active")):
            if s.get(key) is not None:
                parts.append(f"{label} {100 * s[key]:.0f}%")
        if s.get("memory_used_mib") is not None:
            total = f"/{s['memory_total_mib'] / 1024:.0f}" if s.get("memory_total_mib") else ""
            parts.append(f"memory {s['memory_used_mib'] / 1024:.1f}{total} GiB")
        for key, label in (("pcie_bytes_s", "PCIe"), ("nvlink_bytes_s", "NVLink")):
            if s.get(key) is not None:
                parts.append(f"{label} {s[key] / 1e9:.2f} GB/s")
        if s.get("xid"):
            parts.append("[red]XID " + ", ".join(f"{d}: {x}" for d, x in s["xid"].items()) + "[/]")
        if s.get("throttled"):
            parts.append("[yellow]throttled " + "; ".join(f"{d}: {', '.join(r)}" for d, r in s["throttled"].items())
                         + "[/]")
        lines.append(f"GPUs on {node} ({doc['source']}): " + ", ".join(parts))
    if all(not d.get("source") for d in gpus.values()):
        lines.append("No GPUs were seen on any node of this run.")
    return lines


def live_table(doc: dict[str, Any], interval: float) -> Any:
    """The --watch table of one refresh."""
    rows = [(_named(p), p.get("node", ""), p.get("metrics"), p.get("error")) for p in doc["processes"]]
    router = doc["router"]
    rows.append((_named(router), "", router.get("metrics"), router.get("error")))
    title = f"{doc['topology']} — {doc['at']} — every {interval:g} s (Ctrl-C ends)"
    return figures_table(rows, title)


def _named(entry: dict[str, Any]) -> str:
    """The process column of --watch: its name, and `hung 12 s (T)` or `exited` in red when it is."""
    condition = entry.get("state")
    if condition == "hung":
        state = f" ({entry['proc_state']})" if entry.get("proc_state") else ""
        return f"{entry['name']} [red]hung {entry.get('unanswered_s') or 0:.0f} s{state}[/]"
    if condition == "exited":
        return f"{entry['name']} [red]exited[/]"
    return str(entry["name"])


def figures_table(rows: list[tuple[str, str, dict[str, Any] | None, str | None]], title: str) -> Any:
    """One row per process: rates, queue, KV usage, latency percentiles (ms) and transfer failures."""
    from rich.table import Table

    table = Table(title=title, show_edge=False)
    for col in ("process", "node", "req/s", "prompt tok/s", "gen tok/s", "running", "queued", "KV use",
                "TTFT p50/p99", "ITL p50/p99", "E2E p50/p99", "xfer fail"):
        table.add_column(col, justify="left" if col in ("process", "node") else "right", no_wrap=True)
    for name, node, fig, error in rows:
        if fig is None:
            table.add_row(name, node, f"[red]{error or 'no metrics'}[/]", *[""] * 9)
            continue
        failures = fig.get("transfer_failures", fig.get("errors"))
        table.add_row(
            name, node, _num(fig.get("requests_per_s")), _num(fig.get("prompt_tokens_per_s")),
            _num(fig.get("generation_tokens_per_s")), _num(fig.get("running")), _num(fig.get("queued")),
            DASH if fig.get("kv_usage") is None else f"{100 * fig['kv_usage']:.1f}%",
            _pct(fig.get("ttft_ms")), _pct(fig.get("itl_ms")), _pct(fig.get("e2e_ms")),
            DASH if failures is None else (f"[red]{failures}[/]" if failures else "0"),
        )
    return table


def _num(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:.1f}" if isinstance(value, float) and not value.is_integer() else f"{value:g}"


def _pct(p: dict[str, float] | None) -> str:
    return DASH if not p else f"{p['p50']:.0f}/{p['p99']:.0f}"
