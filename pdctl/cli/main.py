"""The `pdctl` entry point: a click group whose subcommands are imported only when invoked.

Lazy loading keeps `pdctl --help` and `pdctl check-compat` free of heavy imports (torch, datasets).
"""

from __future__ import annotations

import importlib
from typing import NoReturn

import click

from pdctl import __version__
from pdctl.errors import PdctlError

# command name -> "module:attribute"; each module owns one command (or a group of them).
COMMANDS: dict[str, str] = {
    "check-compat": "pdctl.cli.compat:check_compat",
    "plan": "pdctl.cli.compat:plan",
    "schema": "pdctl.cli.compat:schema",
    "launch": "pdctl.cli.launch:launch",
    "status": "pdctl.cli.status:status",
    "logs": "pdctl.cli.launch:logs",
    "down": "pdctl.cli.launch:down",
    "restart": "pdctl.cli.launch:restart",
    "eval": "pdctl.cli.eval:eval_group",
    "parity": "pdctl.cli.parity:parity",
    "bench-transfer": "pdctl.cli.bench:bench_transfer",
    "preflight": "pdctl.cli.preflight:preflight",
    "bench": "pdctl.cli.bench_serve:bench_group",
    "reference": "pdctl.cli.reference:reference",
    "sglang-cpu": "pdctl.cli.sglang_cpu:sglang_cpu",
    "suggest": "pdctl.cli.suggest:suggest",
    "runs": "pdctl.cli.runs:runs",
    "diagnose": "pdctl.cli.diagnose:diagnose",
    "diff": "pdctl.cli.diff:diff",
}

SHORT_HELP: dict[str, str] = {
    "check-compat": "Reject a topology SGLang would reject, before launch.",
    "plan": "Show the KV transfer plan: head ownership and descriptors per rank pair.",
    "schema": "Print the JSON Schema of the topology format.",
    "launch": "Start prefill, decode and router from a topology.",
    "status": "Health and live metrics of every process of a run (--watch).",
    "logs": "Show a process's log.",
    "down": "Stop every process of a run.",
    "restart": "Start one dead or hung process of a run again, in place.",
    "eval": "Accuracy evals (gsm8k) against a deployment.",
    "parity": "Logprob parity of a PD deployment against a reference server.",
    "bench-transfer": "Measure one request's KV transfer between real ranks.",
    "preflight": "Check the actual nodes (versions, GPUs, RDMA, model, ports) and a real cross-node transfer.",
    "bench": "Serving sweeps against a control (bench serve).",
    "reference": "The CPU reference engine: checkpoints and serving.",
    "sglang-cpu": "SGLang's real server on CPU nodes: the tiny models it serves.",
    "suggest": "The PD topology to run under TTFT/ITL targets (AIConfigurator + SGLang rules + KV transfer).",
    "diagnose": "From a failed run's logs to the cause and the fix (root cause first).",
    "runs": "Past and live runs launched from here: name, state, started, run dir.",
    "diff": "What differs between two runs (lock.json): topology, versions, node facts.",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("pdctl"):
                return _unavailable(cmd_name, str(exc))
            raise
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing commands must not import them (heavy imports); use the static short help.
        rows = [(name, SHORT_HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, why: str) -> click.Command:
    @click.command(name, help=f"(not available in this build: {why})")
    def _cmd() -> None:
        raise click.UsageError(f"command {name!r} is not available: {why}")

    return _cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pdctl")
def cli() -> None:
    """pdctl: prefill/decode disaggregated SGLang serving — check, launch, eval, parity."""


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code: pdctl errors become a message and 1 (failed check) or 2 (bad input).

    On exit 2 (bad input, bad option) a command given `--json PATH` also gets {"ok": false, "error": ...} there,
    whichever command it is and however early it failed (pdctl.cli.options.write_error_document)."""
    import sys

    from pdctl.cli.console import print_error
    from pdctl.cli.options import write_error_document

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # Without standalone mode click RETURNS the code of a ctx.exit()/Exit(n) instead of raising it.
        code = cli.main(args=args, prog_name="pdctl", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        print_error("aborted")
        return 130
    except click.ClickException as exc:
        exc.show()
        write_error_document(args, exc.format_message())
        return 2
    except PdctlError as exc:
        print_error(exc.message, exc.detail)
        if exc.exit_code == 2 or exc.diagnosis is not None:
            write_error_document(args, exc.message, diagnosis=exc.diagnosis)
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
    except ModuleNotFoundError as exc:  # a CLI-only install: say which extra to install (exit 2)
        from pdctl.extras import missing_module_error

        error = missing_module_error(exc)
        if error is None:
            raise
        print_error(error.message, error.detail)
        return 2
    except OSError as exc:  # a path the user gave (or one derived from it) cannot be used: bad input
        if exc.filename is None:
            raise
        print_error(f"cannot use {exc.filename}: {exc.strerror or exc}")
        return 2
    return code if isinstance(code, int) else 0


def main(argv: list[str] | None = None) -> NoReturn:
    """The `pdctl` console script: run the CLI and end the process with its exit code (pdctl.procexit)."""
    from pdctl.procexit import run_and_exit

    run_and_exit(lambda: run(argv))
