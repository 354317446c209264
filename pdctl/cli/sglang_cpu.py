"""`pdctl sglang-cpu init-model DIR --shape llama|gpt-oss [--seed S]` (parse + print only)."""

from __future__ import annotations

import click

from pdctl.cli.console import console, write_json
from pdctl.cli.options import json_option


@click.group("sglang-cpu")
def sglang_cpu() -> None:
    """SGLang's real server on CPU nodes: the tiny models it serves (docs/sglang-on-cpu.md)."""


@sglang_cpu.command("init-model")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--shape", type=click.Choice(["llama", "gpt-oss"]), default="llama", show_default=True,
              help="llama: a tiny Llama; gpt-oss: a tiny gpt-oss (sliding window + full attention, 4 experts)")
@click.option("--seed", type=int, default=0, show_default=True, help="weights are a pure function of the seed")
@json_option("{path, shape, seed, architecture, vocab_size, checked_release}")
def init_model_cmd(directory: str, shape: str, seed: int, json_path: str | None) -> None:
    """Write a tiny random-weight model with an offline byte-level BPE tokenizer to DIRECTORY, made with
    SGLang's interpreter (`make sglang-env`)."""
    from pdctl.sglang_cpu.sidevenv import init_model

    doc = init_model(directory, shape, seed)
    write_json(json_path, doc)
    if json_path != "-":
        console.print(f"wrote tiny {shape} model ({doc['architecture']}, vocab {doc['vocab_size']}, seed {seed}) "
                      f"to {doc['path']}")
