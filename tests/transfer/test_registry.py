"""The transfer backends and stacks are listed once (pdctl.transfer.registry): every place that offers or checks
one reads that table, the implementation of each entry is found by name, and an unknown one is refused."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import click
import pytest

from pdctl import extras, procexit
from pdctl.cli.main import cli
from pdctl.compat.platform import KNOWN_BACKENDS
from pdctl.errors import UserError
from pdctl.reference.args import build_parser
from pdctl.render.sglang import transfer_backend_name
from pdctl.sglang.argv import parse_argv
from pdctl.sglang.settings import ServerSettings
from pdctl.sglang.table import load_table
from pdctl.topology.schema import topology_json_schema
from pdctl.transfer.backends.factory import create_backend
from pdctl.transfer.registry import (
    BACKENDS,
    NAMES,
    NATIVE_MODULES,
    PDCTL_STACK,
    STACK_NAMES,
    STACKS,
    backend,
    from_sglang,
    stack,
)
from tests.support.topo_factory import make


def test_every_offer_of_a_backend_reads_the_registry() -> None:
    schema = topology_json_schema()["$defs"]["TransferConfig"]["properties"]["backend"]
    assert tuple(schema["enum"]) == NAMES == KNOWN_BACKENDS
    choices = next(a for a in build_parser()._actions if a.dest == "disaggregation_transfer_backend").choices
    assert tuple(choices) == NAMES
    bench = cli.get_command(click.Context(cli), "bench-transfer")
    assert tuple(next(p for p in bench.params if p.name == "backend").type.choices) == NAMES
    suggest = cli.get_command(click.Context(cli), "suggest")
    assert tuple(next(p for p in suggest.params if p.name == "backend").type.choices) == NAMES
    assert procexit.NATIVE_TRANSFER_MODULES == NATIVE_MODULES
    for entry in BACKENDS.values():
        assert all(extras.extra_for(m) == entry.extra for m in (*entry.native_modules, entry.name))


@pytest.mark.parametrize("name", NAMES)
def test_each_entry_names_its_implementation(name: str) -> None:
    module, cls = backend(name).implementation.split(":")
    impl = getattr(importlib.import_module(module), cls)  # imports numpy, not the native library
    methods = ("register", "metadata", "connect", "write", "wait", "notify", "poll", "close")  # TransferBackend's
    assert impl.kind == name and all(callable(getattr(impl, m)) for m in methods)


def test_sglang_spelling_per_protocol_both_ways() -> None:
    for entry in BACKENDS.values():
        for protocol in ("rdma", "tcp"):
            topo, _ = make(transfer={"backend": entry.name, "protocol": protocol})
            name = transfer_backend_name(topo)
            assert name == entry.sglang_name(protocol)
            assert from_sglang(name) == (entry.name, "tcp" if name != entry.name else None)
            argv = ["--disaggregation-transfer-backend", name, "--disaggregation-mode", "prefill"]
            settings = ServerSettings(parse_argv(argv, load_table("0.5.23")), {})
            assert settings.backend == entry.name
    assert from_sglang("mooncake_tcp") == ("mooncake", "tcp")  # SGLang's own name: Mooncake forced onto TCP


def test_an_unknown_backend_is_refused_everywhere() -> None:
    with pytest.raises(UserError, match="unknown transfer backend 'ucx': expected one of nixl, mooncake"):
        backend("ucx")
    with pytest.raises(UserError, match="unknown transfer backend 'ucx'"):
        create_backend("ucx", "x")
    with pytest.raises(UserError, match="transfer.backend"):
        make(transfer={"backend": "ucx"})
    assert from_sglang("fake") == ("fake", None)  # SGLang names pdctl does not drive stay as written (compat says no)


def test_every_offer_of_a_transfer_stack_reads_the_registry() -> None:
    """transfer.stack, the engine's --transfer-stack and bench-transfer --stack offer the registry's stacks, and
    each stack's reference-engine roles are found by the name its entry gives (SGLang's import only when used)."""
    schema = topology_json_schema()["$defs"]["TransferConfig"]["properties"]["stack"]
    assert tuple(schema["enum"]) == STACK_NAMES and schema["default"] == PDCTL_STACK.name
    choices = next(a for a in build_parser()._actions if a.dest == "transfer_stack").choices
    assert tuple(choices) == STACK_NAMES
    bench = cli.get_command(click.Context(cli), "bench-transfer")
    assert tuple(next(p for p in bench.params if p.name == "stack_name").type.choices) == STACK_NAMES
    assert [s.name for s in STACKS.values() if s.sglang_code] == ["sglang"]
    for entry in STACKS.values():
        assert set(entry.roles) == {"prefill", "decode"}
        for target in entry.roles.values():
            module, cls = target.split(":")
            assert importlib.util.find_spec(module) is not None and module.startswith("pdctl.reference.roles.")
            tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
            assert cls in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def test_an_unknown_stack_is_refused() -> None:
    with pytest.raises(UserError, match="unknown transfer stack 'vllm': expected one of pdctl, sglang"):
        stack("vllm")
    with pytest.raises(UserError, match="transfer.stack"):
        make(transfer={"stack": "vllm"})
