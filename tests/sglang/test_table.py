"""SGLang's flag tables: every release 0.5.16-0.5.23 ships, each is SGLang's own parser, and the version
choice says what it did when a topology names a release without a table (or none)."""

from __future__ import annotations

import json

import pytest

from pdctl.sglang.table import flag_history, load_table, renamed_to
from pdctl.sglang.versions import DEFAULT_VERSION, at_least, choose, parse_version, table_versions

RELEASES = ["0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]


def test_every_release_from_0_5_16_to_0_5_23_has_a_table() -> None:
    assert list(table_versions()) == RELEASES and DEFAULT_VERSION == "0.5.23"


@pytest.mark.parametrize("version", RELEASES)
def test_table_is_that_releases_parser(version: str) -> None:
    table = load_table(version)
    assert table.version == version and len(table.flags) > 450
    assert "mooncake_tcp" in table.by_option["--disaggregation-transfer-backend"].choices
    assert table.by_option["--tp-size"].dest == "tp_size" and table.by_option["--tp-size"].type == "int"
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
    assert history.present == ("0.5.16", "0.5.17")
    assert history.explain("0.5.23") == "--torchao-config was removed in SGLang 0.5.18 (last in 0.5.17)"
    assert flag_history("--attn-dp-size").explain("0.5.20") == "--attn-dp-size only exists since SGLang 0.5.22"
    # --cuda-graph-bs was a deprecated alias of --cuda-graph-bs-decode until 0.5.19
    assert renamed_to("--cuda-graph-bs", "0.5.23") == "--cuda-graph-bs-decode"


@pytest.mark.parametrize("asked,version,table,source,noted", [
    (None, "0.5.23", "0.5.23", "assumed", True),
    ("0.5.21", "0.5.21", "0.5.21", "engine.version", False),
    ("0.5.23.post1", "0.5.23.post1", "0.5.23", "engine.version", False),
    ("0.5.22rc1", "0.5.22rc1", "0.5.21", "engine.version", True),
    ("0.5.2", "0.5.2", "0.5.16", "engine.version", True),
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
