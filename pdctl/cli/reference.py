"""`pdctl reference init-checkpoint DIR [--seed S]` and `pdctl reference serve ...` (parse + print only)."""

from __future__ import annotations

import click

from pdctl.cli.console import console, write_json
from pdctl.cli.options import json_option


@click.group("reference")
def reference() -> None:
    """The CPU reference engine: deterministic checkpoints and the SGLang-compatible server."""


@reference.command("init-checkpoint")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--seed", type=int, default=0, show_default=True, help="weights are a pure function of the seed")
@json_option("{path, seed, config}")
def init_checkpoint_cmd(directory: str, seed: int, json_path: str | None) -> None:
    """Write a small deterministic checkpoint (config.json + model.safetensors) to DIRECTORY."""
    import json

    from pdctl.reference.checkpoint import init_checkpoint

    path = init_checkpoint(directory, seed=seed)
    config = json.loads((path / "config.json").read_text())
    write_json(json_path, {"path": str(path.resolve()), "seed": seed, "config": config})
    if json_path != "-":
        console.print(f"wrote reference checkpoint (seed {seed}) to {path}")


@reference.command(
    "serve",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve_cmd(args: tuple[str, ...]) -> None:
    """Run the server; same flags as `python -m pdctl.reference` (see `pdctl reference serve --help`)."""
    if "-h" in args or "--help" in args:  # the flags' help needs none of the engine's packages
        from pdctl.reference.args import build_parser

        build_parser().parse_args(["--help"])
    from pdctl.extras import PROCESS_NEEDS, require

    require(*PROCESS_NEEDS["pdctl.reference"], what="the reference engine")
    from pdctl.reference.server import main  # torch and fastapi (the engine extra)

    code = main(list(args))
    if code:
        raise click.exceptions.Exit(code)
