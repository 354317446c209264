"""`pdctl launch / logs / down`: option parsing and rendering only (work is in pdctl.launch; status: cli/status.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pdctl.cli.options import FiniteFloatRange, json_option, run_dir_option, set_option
from pdctl.cli.render import console, err_console, write_json


def _out(json_path: str | None):
    """Human output goes to stderr when the JSON document goes to stdout."""
    return err_console if json_path == "-" else console


@click.command("launch")
@click.argument("topology", type=click.Path(dir_okay=False))
@click.option(
    "--dry-run", is_flag=True,
    help="Show what would start and write the plan; start nothing. Slurm: print the sbatch script --submit "
    "would submit (stdout is the script). Never touches the records of a run already in --run-dir.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory (default ./.pdctl/runs/<name>).",
)
@click.option(
    "--detach", is_flag=True, help="Return once everything is healthy (default: stay; Ctrl-C stops)."
)
@click.option(
    "--timeout",
    type=FiniteFloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds for the whole deployment to become healthy.",
)
@click.option("--skip-compat", is_flag=True,
              help="Launch / render even if check-compat finds errors (says loudly what it would have refused).")
@click.option(
    "--skip-preflight", is_flag=True, help="Launch without checking the nodes first (pdctl preflight)."
)
@click.option(
    "--executor",
    type=click.Choice(["auto", "slurm"]),
    default="auto",
    show_default=True,
    help="auto: slurm when the topology has a slurm: section, else local for nodes without ssh: and ssh for "
    "the others; slurm: as a Slurm job (sbatch).",
)
@click.option("--submit", is_flag=True,
              help="Slurm: submit the job and wait until ready (what a launch of a Slurm topology does anyway).")
@click.option("--in-allocation", is_flag=True,
              help="Inside a Slurm allocation (salloc, an sbatch job): take its nodes, start every process as "
              "an srun step (what the submitted job runs).")
@set_option
@json_option("the plan (dry run) or the run state")
def launch(
    topology: str,
    dry_run: bool,
    run_dir: str | None,
    detach: bool,
    timeout: float,
    skip_compat: bool,
    skip_preflight: bool,
    executor: str,
    submit: bool,
    in_allocation: bool,
    overrides: tuple[str, ...],
    json_path: str | None,
) -> None:
    """Start prefill, decode and router from TOPOLOGY, wait until healthy, print the URLs.

    A topology with a slurm: section (or --executor slurm) is submitted as a Slurm job, which runs
    `pdctl launch --in-allocation` on its nodes; --dry-run prints its sbatch script instead.

    Every path (a launch, --dry-run, the Slurm script, the job itself) runs check-compat first on the commands
    it renders, with the SGLang version from engine.version or, when that is missing, asked from the nodes; a
    launch then runs preflight of the actual nodes (--skip-compat / --skip-preflight skip them, loudly).
    Under Slurm the job does both on the nodes it was given."""
    from pdctl.errors import UserError
    from pdctl.launch.gate import gate
    from pdctl.launch.planner import render
    from pdctl.runs import default_run_dir
    from pdctl.topology import load_topology

    out = _out(json_path)
    topo = load_topology(topology, overrides)
    path = Path(run_dir) if run_dir else default_run_dir(topo.name)
    slurm = executor == "slurm" or (executor == "auto" and topo.slurm is not None)
    if in_allocation and (dry_run or submit):
        raise UserError("--in-allocation starts the deployment in this allocation: it takes no --dry-run or --submit")
    if submit and not slurm:
        raise UserError("--submit applies to Slurm: add a slurm: section to the topology, or --executor slurm")
    if not dry_run and skip_preflight and (in_allocation or not slurm):  # a submitted job says it itself
        err_console.print("[bold yellow]warning:[/] --skip-preflight: the nodes are NOT checked before launch "
                          "(versions, model, ports, transfer path)")
    if in_allocation:
        from pdctl.launch.slurm.submit import launch_in_allocation

        _foreground(out, json_path, launch_in_allocation, topo, path, timeout=timeout, skip_compat=skip_compat,
                    detach=detach, preflight=not skip_preflight, warn=_loud)
        return
    # Slurm nodes cannot be asked before the job runs (the job asks them); a dry run asks what it can reach
    # but does not fail on it
    topo, version = gate(topo, skip_compat=skip_compat, ask=not slurm, strict=not (dry_run or slurm), warn=_loud,
                         notice=_notice)
    if version is not None and version.note:
        err_console.print(f"[yellow]note:[/] {version.note}", highlight=False)
    if dry_run:
        plan = render(topo, startup_timeout_s=int(timeout), slurm=slurm)
        doc = _dry_run(topo, plan, path, slurm, timeout, skip_compat, skip_preflight, out)
        write_json(json_path, doc)
        return
    if slurm:  # a Slurm topology launches as a job: submit it and follow it until ready
        plan = render(topo, startup_timeout_s=int(timeout), slurm=True)
        _warn_unshared(topo, path)
        write_json(json_path, _submit(topo, plan, path, timeout, skip_compat, skip_preflight, out))
        return
    from pdctl.launch.supervisor import launch_topology

    _foreground(out, json_path, launch_topology, topo, path, timeout=timeout, skip_compat=skip_compat,
                detach=detach, preflight=not skip_preflight)


def _dry_run(topo: Any, plan: Any, path: Path, slurm: bool, timeout: float, skip_compat: bool,
             skip_preflight: bool, out: Any) -> dict[str, Any]:
    """Show what a launch would do, write its plan (beside a run already in PATH, never over its records).
    Slurm: the sbatch script --submit would submit, exactly, on stdout (`> job.sbatch` keeps it runnable)."""
    from rich.markup import escape

    from pdctl.launch.gate import missing_here
    from pdctl.launch.state import dry_run_dir, write_plan

    where = dry_run_dir(path)
    if where != path:
        err_console.print(f"[yellow]note:[/] {path} holds a run's records (state.json): this dry run writes to "
                          f"{where} and leaves them alone", highlight=False, soft_wrap=True)
    plan_file = write_plan(where, plan)
    doc = plan.to_json()
    if slurm:
        from pdctl.launch.slurm.script import SCRIPT_NAME, render_sbatch

        script = render_sbatch(topo, path, timeout=timeout, skip_compat=skip_compat, skip_preflight=skip_preflight)
        (where / SCRIPT_NAME).write_text(script, encoding="utf-8")
        out.print(script, markup=False, highlight=False, soft_wrap=True, end="")
        err_console.print(f"[dim]# the sbatch script --submit submits (also in {where / SCRIPT_NAME}); the srun "
                          f"steps the job starts: {plan_file}[/]", highlight=False, soft_wrap=True)
        _warn_unshared(topo, path)
        doc["sbatch"] = script
        return doc
    _print_plan(plan, out)
    out.print(f"[dim]plan written to {plan_file}[/]")
    for error in missing_here(plan):  # the plan is written; launching it from here would be refused
        err_console.print(f"[bold yellow]warning:[/] {escape(f'{error.message}; {error.detail}')}",
                          highlight=False)
    return doc


def _warn_unshared(topo: Any, path: Path) -> None:
    """Warn when paths the Slurm job needs are likely not on a filesystem its nodes share."""
    from pdctl.launch.render_sglang import model_path
    from pdctl.launch.slurm.sharedfs import job_paths, unshared

    lines = unshared(job_paths(path, model_path(topo)))
    if lines:
        err_console.print("[bold yellow]warning:[/] the Slurm job reads and writes these on its nodes, which need "
                          "them on a filesystem they share (preflight in the job fails if a node cannot read the "
                          "run dir):", highlight=False, soft_wrap=True)
        for line in lines:
            err_console.print(f"  - {line}", highlight=False, soft_wrap=True, markup=False)


def _notice(message: str) -> None:
    """check-compat's fired warnings at launch: yellow, on stderr."""
    err_console.print(f"[bold yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def _foreground(out: Any, json_path: str | None, start: Any, topo: Any, path: Path, **options: Any) -> None:
    """A launch from here (local/ssh, or srun steps in an allocation): live progress, the ready message."""
    with _ProgressView() as view:

        def ready(state: dict[str, Any]) -> None:
            view.stop()
            _print_ready(state, out, foreground=True)

        state = start(topo, path, progress=view.update, on_ready=ready,
                      on_preflight=lambda r: _preflight_seen(r, out), **options)
    _print_ready(state, out, foreground=False)
    write_json(json_path, state)


def _loud(message: str) -> None:
    """--skip-compat's notice: on stderr, in red, never mixed into a JSON document on stdout."""
    err_console.print(f"[bold red]WARNING[/] {message}", highlight=False, soft_wrap=True)


def _preflight_seen(report: Any, out: Any) -> None:
    """Launch's view of its preflight: the full tables when it failed, one line per transfer when it passed."""
    from pdctl.cli.preflight import render_brief, render_report

    if report.ok:
        render_brief(report, err_console)
    else:
        render_report(report, err_console)


def _submit(topo: Any, plan: Any, path: Path, timeout: float, skip_compat: bool, skip_preflight: bool,
            out: Any) -> dict[str, Any]:
    """sbatch the job and follow it (its output relayed on stderr) until its deployment is ready."""
    from rich.text import Text

    from pdctl.launch.slurm.submit import submit_topology

    def say(line: str) -> None:
        err_console.print(Text("job | ", style="dim") + Text(line), highlight=False, soft_wrap=True)

    with _ProgressView() as view:
        state = submit_topology(topo, plan, path, timeout=timeout, skip_compat=skip_compat,
                                skip_preflight=skip_preflight, progress=view.update, say=say)
    out.print(f"[bold green]ready[/] — slurm job {state['job_id']}, router {state['router']['url']}", highlight=False)
    out.print(f"  run dir: {state['run_dir']}  (pdctl status | logs | down)", highlight=False)
    return state


def _print_plan(plan: Any, out: Any) -> None:
    for node, procs in plan.by_node().items():
        out.print(f"[bold]# node {node}[/] ({procs[0].host})")
        for proc in procs:
            out.print(f"# {proc.name} (advertises {proc.advertise or proc.host})", style="dim", highlight=False)
            out.print(proc.command, markup=False, highlight=False, soft_wrap=True)
        out.print()
    out.print(f"[bold]router URL:[/] {plan.router_url}")
    for note in plan.notes:
        out.print(f"[dim]note: {note}[/]")


def _print_ready(state: dict[str, Any], out: Any, *, foreground: bool) -> None:
    stay = "  (Ctrl-C stops everything)" if foreground else ""
    out.print(f"[bold green]ready[/] — router {state['router']['url']}{stay}")
    for rec in state["processes"]:
        out.print(
            f"  {rec['name']:<14} {rec['node']:<10} pid {rec['pid']:<8} {rec.get('url') or ''}",
            highlight=False,
        )
    out.print(f"  run dir: {state['run_dir']}  (pdctl status | logs | down)", highlight=False)


class _ProgressView:
    """A live table, one row per process, while launch waits; on stderr so it never mixes with JSON."""

    def __init__(self) -> None:
        import threading

        self.rows: dict[str, tuple[str, str]] = {}
        self.live: Any = None
        self.lock = threading.Lock()

    def __enter__(self) -> _ProgressView:  # noqa: PYI034
        from rich.live import Live

        self.live = Live(self._table(), console=err_console, refresh_per_second=4, transient=True)
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        with self.lock:
            if self.live is not None:
                self.live.__exit__(None, None, None)
                self.live = None

    def update(self, name: str, phase: str, detail: str) -> None:
        # called from launch's worker threads too (processes start concurrently)
        with self.lock:
            self.rows[name] = (phase, detail)
            if self.live is not None:
                self.live.update(self._table())

    def _table(self) -> Any:
        from rich.spinner import Spinner
        from rich.table import Table

        colors = {"healthy": "green", "failed": "red", "stopped": "yellow"}
        table = Table(title="pdctl launch", show_edge=False)
        for col in ("", "process", "state", "detail"):
            table.add_column(col)
        for name, (phase, detail) in list(self.rows.items()):
            icon: Any = Spinner("dots") if phase in ("starting", "waiting") else ""
            table.add_row(icon, name, f"[{colors.get(phase, 'cyan')}]{phase}[/]", detail)
        return table


@click.command("logs")
@click.argument("process", required=False)
@run_dir_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines (one process).")
@click.option(
    "--tail", "-n", type=click.IntRange(min=1), default=50, show_default=True, help="Lines to show."
)
def logs(process: str | None, run_dir: str | None, follow: bool, tail: int) -> None:
    """Show the log of PROCESS (ROLE[:REPLICA] or a process name; all when omitted)."""
    import sys

    from pdctl.errors import UserError
    from pdctl.launch.logs import follow as follow_log
    from pdctl.launch.logs import read, records_of

    records = records_of(run_dir, process)
    if follow:
        if len(records) != 1:
            names = ", ".join(r["name"] for r in records)
            raise UserError(f"--follow needs exactly one process; {process or 'all'} matches {names}")
        try:
            for chunk in follow_log(records[0], tail):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
        return
    for record in records:
        if len(records) > 1:
            console.print(
                f"[bold]==> {record['name']} ({record['node']}) {record['log']} <==[/]", highlight=False
            )
        text = read(record, tail)
        if text:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


@click.command("down")
@run_dir_option
@click.option(
    "--grace",
    type=FiniteFloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL.",
)
def down(run_dir: str | None, grace: float) -> None:
    """Stop every process of a run: SIGTERM to each process group, SIGKILL after the grace period."""
    from pdctl.errors import CheckFailed
    from pdctl.launch.shutdown import teardown

    outcome = teardown(run_dir, grace_s=grace)
    for name, what in outcome.items():
        console.print(f"  {name:<16} {what}", highlight=False)
    if not outcome:
        console.print("nothing was running")
    left = [n for n, w in outcome.items() if w == "still running"]
    if left:
        raise CheckFailed(f"still running after SIGKILL: {', '.join(left)}")
