"""`--set KEY=VALUE` (pdctl.topology.overrides): typed values, dotted keys, validated like the file with the
same messages located at the option, exit 2 on a bad key, and the run keeps the topology that really ran."""

from __future__ import annotations

import pytest
import yaml

from pdctl.errors import UserError
from pdctl.topology import load_topology
from tests.compat.test_cli import pdctl
from tests.support.exits import assert_bad_input
from tests.support.paths import CONFIGS_DIR

LOCAL = CONFIGS_DIR / "local-cpu.yaml"


def test_values_are_typed_and_keys_dotted() -> None:
    topo = load_topology(LOCAL, ["decode.tp=2", "server.args.max-running-requests=8", "nodes[0].gpus=6",
                                 "transfer.backend=mooncake", "prefill.args.served-model-name='7'"])
    assert topo.decode.tp == 2 and topo.nodes[0].gpus == 6 and topo.transfer.backend == "mooncake"
    assert topo.prefill.args == {"max-running-requests": 8, "served-model-name": "7"}
    assert topo.overrides[0] == "decode.tp=2" and topo.document["decode"]["tp"] == 2
    assert load_topology(LOCAL).overrides == () and load_topology(LOCAL).document is None


@pytest.mark.parametrize(("override", "message"), [
    ("prefill.tpp=2", r"^--set prefill.tpp=2: prefill.tpp: unknown key 'tpp'; did you mean 'tp'\?$"),
    ("prefill.tp=abc", r"^--set prefill.tp=abc: prefill.tp: expected an integer, got the string 'abc'$"),
    ("nodes[0].gpu=h9000", r"^--set nodes\[0\].gpu=h9000: nodes\[0\].gpu: expected one of .*did you mean 'h200'"),
    ("nodes.4.gpu=h100", r"nodes has 1 entries; there is no \[4\]"),
    ("slurm.partitionn=gpu", r"slurm.partitionn: unknown key 'partitionn'; did you mean 'partition'"),
    ("prefill.tp", r"expected KEY=VALUE"),
    ("prefill..tp=1", r"bad key 'prefill..tp'"),
    ("prefill.tp=[1", r"the value is not valid YAML"),
    ("name.x=1", r"name is str, not a mapping"),
])
def test_bad_overrides_are_located_at_the_option(override: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_topology(LOCAL, [override])


def test_every_command_reading_a_topology_takes_set(tmp_path) -> None:
    for command in (["check-compat"], ["plan"], ["launch", "--dry-run", "--run-dir", str(tmp_path / "r")],
                    ["preflight"], ["bench-transfer"]):
        assert_bad_input(pdctl(*command, str(LOCAL), "--set", "decode.tpp=2"),
                         r"--set decode.tpp=2: decode.tpp: unknown key 'tpp'; did you mean 'tp'\?")
    done = pdctl("check-compat", str(LOCAL), "--set", "decode.tp=2", "--json", "-")
    assert done.returncode == 0, done.stderr
    assert '"tp": 2' in done.stdout or yaml.safe_load(done.stdout)["attn_tp"]["decode"]["tp"] == 2


def test_a_dry_run_keeps_what_it_rendered(tmp_path) -> None:
    done = pdctl("launch", str(LOCAL), "--dry-run", "--set", "decode.tp=2", "--set", "nodes[0].gpus=6",
                 "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert "--role decode --tp 2" in done.stdout
