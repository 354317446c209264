"""`pdctl launch / logs / down`: option parsing and printing only (work is in pdctl.launch; status: cli/status.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import FiniteFloatRange, json_option, read_topology, run_dir_option, set_option
from pdctl.render.kinds import AUTO, kind_choices


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
    type=click.Choice([AUTO, *kind_choices()]),
    default="auto",
    show_default=True,
    help="auto: slurm with a slurm: section, kubernetes with a kubernetes: section, else local (ssh for nodes "
    "with ssh:); local and ssh are one kind (each node as its ssh: says); slurm: as a Slurm job (sbatch); "
    "kubernetes: apply LeaderWorkerSet / RoleBasedGroup manifests (--dry-run writes and prints them).",
)
@click.option("--submit", is_flag=True,
              help="Slurm: submit the job and wait until ready (what a launch of a Slurm topology does anyway).")
@click.option("--in-allocation", is_flag=True,
              help="Inside a Slurm allocation (salloc, an sbatch job): take its nodes, start every process as "
              "an srun step (what the submitted job runs).")
@click.option("--keep-going", is_flag=True,
              help="A sweep: launch the variants that pass check-compat even if others fail (and go on when one "
              "variant's launch fails).")
@set_option
@json_option("the rendered deployment (dry run; Slurm: with its sbatch script; Kubernetes: with its manifests) "
             "or the run state")
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
    keep_going: bool,
    overrides: tuple[str, ...],
    cluster: str | None,
    json_path: str | None,
) -> None:
    """Start prefill, decode and router from TOPOLOGY, wait until healthy, print the URLs.

    A topology with a slurm: section (or --executor slurm) is submitted as a Slurm job, which runs
    `pdctl launch --in-allocation` on its nodes; --dry-run prints its sbatch script instead.

    Every path (a launch, --dry-run, the Slurm script, the job itself) runs check-compat first on the commands
    it renders, with the SGLang version from engine.version or, when that is missing, asked from the nodes; a
    launch then runs preflight of the actual nodes (--skip-compat / --skip-preflight skip them, loudly).
    Under Slurm the job does both on the nodes it was given.

    A topology with `sweep:` launches one run per variant, in <run-dir>/<variant> (Slurm: one job each), after
    check-compat passed every variant (--keep-going: the ones that pass)."""
    from pdctl.launch.deploy import LaunchHooks, LaunchOptions, launch
    from pdctl.topology.profile import open_profile
    from pdctl.topology.variants import load_sweep

    out = _out(json_path)
    # an alias (ssh) is its kind (local: each node is reached as its ssh: says)
    options = LaunchOptions(run_dir=Path(run_dir) if run_dir else None, executor=executor, dry_run=dry_run,
                            submit=submit, in_allocation=in_allocation, timeout=timeout, skip_compat=skip_compat,
                            preflight=not skip_preflight, detach=detach)
    profile = open_profile(cluster)
    sweep = None if in_allocation else load_sweep(topology, overrides, profile=profile)
    if sweep is not None:
        _launch_sweep(sweep, options, keep_going, json_path, out)
        return
    topo = read_topology(topology, overrides, cluster)
    with _ProgressView() as view:

        def ready(state: dict[str, Any]) -> None:
            view.stop()
            _print_ready(state, out, foreground=True)

        done = launch(topo, options, LaunchHooks(
            loud=_loud, warning=_warning, notice=_warning, note=_note, progress=view.update, on_ready=ready,
            on_preflight=lambda report: _preflight_seen(report, out, view), say=_job_line,
            preflight_progress=lambda line: _preflight_step(view, line)))
    if done.outcome == "dry-run":
        write_json(json_path, _dry_run(done, out))
    elif done.outcome == "submitted":
        assert done.state is not None
        out.print(f"[bold green]ready[/] — slurm job {done.state['job_id']}, router {done.state['router']['url']}",
                  highlight=False)
        out.print(f"  run dir: {done.state['run_dir']}  (pdctl status | logs | down)", highlight=False)
        write_json(json_path, done.state)
    else:
        assert done.state is not None
        _print_ready(done.state, out, foreground=False)
        write_json(json_path, done.state)


def _launch_sweep(sweep: Any, options: Any, keep_going: bool, json_path: str | None, out: Any) -> None:
    """One run per variant (pdctl.launch.sweep), then a table of what each variant did; exit 1 if any variant
    failed check-compat or its launch."""
    from rich.table import Table
    from rich.text import Text

    from pdctl.errors import CheckFailed
    from pdctl.launch.deploy import LaunchHooks
    from pdctl.launch.sweep import launch_sweep

    hooks = LaunchHooks(loud=_loud, warning=_warning, notice=_warning, note=_note, say=_job_line,
                        on_preflight=lambda report: _preflight_seen(report, out),
                        preflight_progress=lambda line: _preflight_step(None, line))
    runs = launch_sweep(sweep, options, hooks, keep_going=keep_going)
    table = Table(title=f"sweep {sweep.source.name}: {len(runs)} variant(s)")
    for col in ("variant", "check-compat", "outcome", "run dir"):
        table.add_column(col, overflow="fold")
    for run in runs:
        verdict = "pass" if run.ok else "FAIL " + ", ".join(run.failed_rules)
        outcome = run.outcome + (f" (job {run.job_id})" if run.job_id else "") + (
            f": {run.detail}" if run.outcome == "failed" else "")
        table.add_row(Text(run.name), Text(verdict), Text(outcome), Text(str(run.run_dir)))
    err_console.print(table) if options.dry_run else out.print(table)
    write_json(json_path, {"variants": [r.to_json() for r in runs]})
    failed = [r for r in runs if not r.ok or r.outcome == "failed"]
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(runs)} variant(s) did not run: "
                          + ", ".join(r.name for r in failed))


def _loud(message: str) -> None:
    """--skip-compat's notice: on stderr, in red, never mixed into a JSON document on stdout."""
    err_console.print(f"[bold red]WARNING[/] {message}", highlight=False, soft_wrap=True)


def _warning(message: str) -> None:
    """A warning on stderr (what is not checked, job paths not shared, check-compat's fired warnings)."""
    from rich.markup import escape

    err_console.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _dry_run(done: Any, out: Any) -> dict[str, Any]:
    """What a dry run shows: every command per node and where the deployment was written; a Slurm topology's
    sbatch script, exactly as --submit submits it, on stdout (`> job.sbatch` keeps it runnable); a Kubernetes
    deployment's manifests (`| kubectl apply -f -`). The JSON document is the deployment (with the script under
    `sbatch`, the manifests under `manifests`)."""
    if done.beside:
        _note(f"{done.run_dir} holds a run's records (state.json): this dry run writes to "
              f"{done.plan_file.parent} and leaves them alone")
    _profile_notes(done.deployment.topo.profile)
    doc = done.deployment.to_json()
    if done.manifests is not None:  # Kubernetes: the manifests, as the script of a Slurm job
        manifests = done.manifests.read_text(encoding="utf-8")
        out.print(manifests, markup=False, highlight=False, soft_wrap=True, end="")
        err_console.print(f"[dim]# the manifests a launch applies (also in {done.manifests}); plan: "
                          f"{done.plan_file}[/]", highlight=False, soft_wrap=True)
        return {**doc, "manifests": manifests}
    if done.script is not None:
        script = done.script.read_text(encoding="utf-8")
        out.print(script, markup=False, highlight=False, soft_wrap=True, end="")
        err_console.print(f"[dim]# the sbatch script --submit submits (also in {done.script}); the srun steps the "
                          f"job starts: {done.plan_file}[/]", highlight=False, soft_wrap=True)
        return {**doc, "sbatch": script}
    _print_deployment(done.deployment, out)
    out.print(f"[dim]plan written to {done.plan_file}[/]")
    for error in done.missing:  # the plan is written; launching it from here would be refused
        _warning(f"{error.message}; {error.detail}")
    return doc


def _profile_notes(profile: dict[str, Any] | None) -> None:
    """What the cluster profile filled in or resolved (alias -> value), one note each (stderr: stdout keeps the
    script or manifests runnable); the same records are in state.json and lock.json under profile.resolved."""
    for key, record in ((profile or {}).get("resolved") or {}).items():
        alias = f"{record['alias']} -> " if record.get("alias") else ""
        _note(f"cluster profile {profile['path']}: {key} = {alias}{record.get('value')}")


def _note(message: str) -> None:
    err_console.print(f"[yellow]note:[/] {message}", highlight=False, soft_wrap=True)


def _job_line(line: str) -> None:
    """A line of a submitted job's output, relayed on stderr."""
    from rich.text import Text

    err_console.print(Text("job | ", style="dim") + Text(line), highlight=False, soft_wrap=True)


def _preflight_step(view: _ProgressView | None, line: str) -> None:
    """A step of launch's preflight: a row of the live table on a terminal, a line on stderr otherwise."""
    if view is not None and err_console.is_terminal:
        view.update("preflight", "waiting", line)
    else:
        err_console.print(f"preflight: {line}", highlight=False, markup=False, soft_wrap=True)


def _preflight_seen(report: Any, out: Any, view: _ProgressView | None = None) -> None:
    """Launch's view of its preflight: the full tables when it failed, a few lines when it passed (and its row
    of the live table, when there is one: a sweep's launches have none)."""
    from pdctl.cli.preflight import print_brief, print_report

    if view is not None and err_console.is_terminal:
        view.update("preflight", "healthy" if report.ok else "failed", f"{report.wall_s:.1f}s")
    if report.ok:
        print_brief(report, err_console)
    else:
        print_report(report, err_console)


def _print_deployment(deployment: Any, out: Any) -> None:
    """Every command per node (--dry-run), then the router URL and the render's notes."""
    for node, procs in deployment.by_node().items():
        out.print(f"[bold]# node {node}[/] ({procs[0].host})")
        for proc in procs:
            out.print(f"# {proc.name} (advertises {proc.advertise or proc.host})", style="dim", highlight=False)
            out.print(proc.command, markup=False, highlight=False, soft_wrap=True)
        out.print()
    out.print(f"[bold]router URL:[/] {deployment.router_url}")
    for note in deployment.notes:
        out.print(f"[dim]note: {note}[/]")


def _print_ready(state: dict[str, Any], out: Any, *, foreground: bool) -> None:
    stay = "  (Ctrl-C stops everything)" if foreground else ""
    out.print(f"[bold green]ready[/] — router {state['router']['url']}{stay}")
    for rec in state["processes"]:
        where = f"pod {rec['pod']}" if rec.get("pod") else f"pid {rec['pid']!s:<8}"
        out.print(f"  {rec['name']:<14} {rec['node']:<10} {where} {rec.get('url') or ''}", highlight=False)
    out.print(f"  run dir: {state['run_dir']}  (pdctl status | logs | down)", highlight=False)
    from pdctl.runs.state import numerics_notes

    for note in numerics_notes(Path(state["run_dir"])):
        out.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)


class _ProgressView:
    """A live table, one row per process, while launch waits; on stderr so it never mixes with JSON."""

    def __init__(self) -> None:
        import threading

        self.rows: dict[str, tuple[str, str]] = {}
        self.live: Any = None
        self.stopped = False
        self.lock = threading.Lock()

    def __enter__(self) -> _ProgressView:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            if self.live is not None:
                self.live.__exit__(None, None, None)
                self.live = None

    def update(self, name: str, phase: str, detail: str) -> None:
        # called from launch's worker threads too (processes start concurrently); the table appears with the
        # first process (a dry run or a script shows none)
        with self.lock:
            self.rows[name] = (phase, detail)
            if self.live is None and not self.stopped:
                from rich.live import Live

                self.live = Live(self._table(), console=err_console, refresh_per_second=4, transient=True)
                self.live.__enter__()
            elif self.live is not None:
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


@click.command("restart")
@click.argument("target", metavar="ROLE[:REPLICA]")
@run_dir_option
@click.option("--timeout", type=FiniteFloatRange(min=1), default=300.0, show_default=True,
              help="Seconds to wait for it to serve and for the router to route to it again.")
@click.option("--force", is_flag=True, help="Restart it even though it runs and answers.")
def restart(target: str, run_dir: str | None, timeout: float, force: bool) -> None:
    """Start one dead or hung process of a run again, in place (prefill, decode, colocated or router;
    REPLICA defaults to 0): same command, ports and log (the old one kept as .prev), re-registered with the
    router; a restarted prefill or decode must then serve a generate whose KV crosses the link with every
    peer it pairs with. Local and ssh processes; exit 1 if it does not come back or a pair does not serve
    (naming the peer to restart too)."""
    from pdctl.launch.restart import restart as do_restart

    done = do_restart(run_dir, target, timeout_s=timeout, force=force,
                      say=lambda m: err_console.print(m, highlight=False))
    console.print(f"restarted {', '.join(done['restarted'])} (pid {', '.join(map(str, done['pids']))}); serving and "
                  f"routed to after {done['ready_after_s']:g} s", highlight=False)
    if done.get("link_proved"):
        console.print(f"KV crossed {', '.join(done['link_proved'])}: a generate served over every pair it forms",
                      highlight=False)
