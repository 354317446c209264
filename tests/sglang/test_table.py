"""SGLang's flag tables: every 0.5 release 0.5.0rc2-0.5.23 (and the post-releases srt-slurm recipes run) ships,
each is SGLang's own parser, and the version choice says what it did when a topology names a release without
a table (or none)."""

from __future__ import annotations

import json

import pytest

from pdctl.sglang.table import flag_history, load_table, renamed_to
from pdctl.sglang.versions import DEFAULT_VERSION, at_least, choose, parse_version, table_versions

RELEASES = ["0.5.0rc2", "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.5.post2", "0.5.6", "0.5.6.post2", "0.5.7",
            "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.13.post1", "0.5.14",
            "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
MOONCAKE_TCP_SINCE = "0.5.13"  # SGLang's `mooncake_tcp` backend name (before: mooncake + MC_FORCE_TCP=1, read by Mooncake)


def test_every_0_5_release_has_a_table() -> None:
    """Each minor 0.5.0-0.5.23 (0.5.0 as its last release candidate: PyPI has no 0.5.0), and the post-releases
    srt-slurm's recipes run (0.5.5.post2, 0.5.6.post2, 0.5.8.post1, 0.5.13.post1)."""
    assert list(table_versions()) == RELEASES and DEFAULT_VERSION == "0.5.23"


@pytest.mark.parametrize("version", RELEASES)
def test_table_is_that_releases_parser(version: str) -> None:
    table = load_table(version)
    assert table.version == version and len(table.flags) > 180
    backends = table.by_option["--disaggregation-transfer-backend"].choices
    assert {"mooncake", "nixl"} <= set(backends)
    assert ("mooncake_tcp" in backends) == at_least(choose(version), MOONCAKE_TCP_SINCE)
    assert table.by_option["--tp-size"].type == "int"
    dest = "tp_size" if at_least(choose(version), "0.5.14") else "tensor_parallel_size"  # see FROM_CLI_ARGS
    assert table.by_option["--tp-size"].dest == dest
    assert table.by_option["--model-path"].required
    assert table.resolve("--tensor-parallel-size")[0] is table.by_option["--tp-size"]


def test_tables_are_json_one_action_per_line() -> None:
    from pdctl.sglang.versions import TABLE_DIR

    text = (TABLE_DIR / "sglang-0.5.23.json").read_text()
    doc = json.loads(text)
    assert doc["sglang"] == "0.5.23" and doc["source"] == "ServerArgs.add_cli_args"
    assert len(text.splitlines()) == len(doc["actions"]) + 2


def test_releases_differ_where_sglang_changed() -> None:
    assert "--attn-dp-size" not in load_table("0.5.21") and "--attn-dp-size" in load_table("0.5.22")
    assert load_table("0.5.22").by_option["--enable-dp-attention"].kind == "DeprecatedStoreTrueAction"
    assert "--torchao-config" in load_table("0.5.17") and "--torchao-config" not in load_table("0.5.18")
    history = flag_history("--torchao-config")
    assert history.present[0] == "0.5.0rc2" and history.present[-1] == "0.5.17"
    assert history.explain("0.5.23") == "--torchao-config was removed in SGLang 0.5.18 (last in 0.5.17)"
    assert flag_history("--attn-dp-size").explain("0.5.20") == "--attn-dp-size only exists since SGLang 0.5.22"
    # --cuda-graph-bs was a deprecated alias of --cuda-graph-bs-decode until 0.5.19
    assert renamed_to("--cuda-graph-bs", "0.5.23") == "--cuda-graph-bs-decode"


@pytest.mark.parametrize("asked,version,table,source,noted", [
    (None, "0.5.23", "0.5.23", "assumed", True),
    ("0.5.21", "0.5.21", "0.5.21", "engine.version", False),
    ("0.5.23.post1", "0.5.23.post1", "0.5.23", "engine.version", True),
    ("0.5.22rc1", "0.5.22rc1", "0.5.21", "engine.version", True),
    ("0.5.2", "0.5.2", "0.5.2", "engine.version", False),
    ("0.5.8", "0.5.8", "0.5.8", "engine.version", False),
    ("0.5.5.post2", "0.5.5.post2", "0.5.5.post2", "engine.version", False),
    ("0.5.5.post3", "0.5.5.post3", "0.5.5.post2", "engine.version", True),
    ("0.5.6.post1", "0.5.6.post1", "0.5.6", "engine.version", True),
    ("0.5.0", "0.5.0", "0.5.0rc2", "engine.version", True),
    ("0.4.10", "0.4.10", "0.5.0rc2", "engine.version", True),
    ("0.6.0", "0.6.0", "0.5.23", "engine.version", True),
    ("nonsense", "0.5.23", "0.5.23", "engine.version", True),
])
def test_version_choice(asked, version, table, source, noted) -> None:
    choice = choose(asked)
    assert (choice.version, choice.table, choice.source, choice.note is not None) == (version, table, source, noted)


def test_version_order() -> None:
    assert parse_version("0.5.22rc1") < parse_version("0.5.22") < parse_version("0.5.22.post1")
    assert parse_version("0.5") == (0, 5, 0, 0, 0) and parse_version("x") is None
    assert at_least(choose("0.5.22"), "0.5.22") and not at_least(choose("0.5.21"), "0.5.22")


def test_older_flags_are_judged_by_their_own_release() -> None:
    """An 0.5.8 command is parsed with 0.5.8's parser: what 0.5.16 deprecated is plain there, and what came
    after 0.5.8 is unknown there, with the release that added it."""
    from pdctl.sglang.argv import parse_argv

    argv = ["--model-path", "m", "--cuda-graph-max-bs", "256", "--disable-cuda-graph"]
    old, new = parse_argv(argv, load_table("0.5.8")), parse_argv(argv, load_table("0.5.16"))
    assert not old.problems and not old.warnings and old.values["cuda_graph_max_bs"] == 256
    assert any("--cuda-graph-max-bs is deprecated in SGLang 0.5.16" in w for w in new.warnings), new.warnings
    later = parse_argv(["--model-path", "m", "--disaggregation-decode-enable-radix-cache"], load_table("0.5.8"))
    [problem] = later.problems
    assert "not a flag of SGLang 0.5.8" in problem.message and "only exists since SGLang 0.5." in problem.message
    assert not parse_argv(["--model-path", "m", "--disaggregation-decode-enable-radix-cache"],
                          load_table("0.5.23")).problems


@pytest.mark.parametrize("version", ["0.5.0rc2", "0.5.8", "0.5.13", "0.5.14", "0.5.23"])
def test_parallel_sizes_read_as_the_server_reads_them(version: str) -> None:
    """Up to 0.5.13 argparse stores --tp-size as tensor_parallel_size and ServerArgs.from_cli_args copies it to
    tp_size: the rules read tp_size in every release."""
    from pdctl.sglang.argv import parse_argv

    got = parse_argv(["--model-path", "m", "--tp-size", "4", "--pp-size", "2", "--dp-size", "2"], load_table(version))
    assert not got.problems and (got.get("tp_size"), got.get("pp_size"), got.get("dp_size")) == (4, 2, 2)


def test_the_makefile_builds_the_overlays_the_differential_tests_run() -> None:
    import re

    from tests.support.paths import REPO
    from tests.support.sglang_env import ORACLE_RELEASES, RESOLUTION_RELEASES

    makefile = (REPO / "Makefile").read_text()
    listed = re.search(r"^SGLANG_ORACLE_RELEASES := (.*)$", makefile, re.MULTILINE)
    assert listed and tuple(listed.group(1).split()) == ORACLE_RELEASES
    assert set(ORACLE_RELEASES) <= set(RELEASES)
    resolution = re.search(r"^SGLANG_RESOLUTION_RELEASES := (.*)$", makefile, re.MULTILINE)
    assert resolution and ("0.5.23", *resolution.group(1).split()) == RESOLUTION_RELEASES  # 0.5.23: the venv
