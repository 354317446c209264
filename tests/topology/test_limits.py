"""Input limits of the topology loader: a huge file, a huge value or deep nesting fail fast with exit 2 and a
position, and never cost minutes or gigabytes (pdctl reads untrusted YAML)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.topology import load_topology, load_topology_text
from pdctl.topology.yamltree import MAX_DEPTH, MAX_FILE_BYTES, MAX_SCALAR_CHARS
from tests.support.launch_e2e import pdctl


def test_limits_are_the_documented_ones() -> None:
    assert (MAX_FILE_BYTES, MAX_SCALAR_CHARS, MAX_DEPTH) == (1 << 20, 64 << 10, 64)


def test_a_file_over_1_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w") as fh:  # 50 MB: reading and parsing it used to take minutes and gigabytes
        fh.write("name: x\n")
        fh.write(("#" * 1023 + "\n") * (50 * 1024))
    with pytest.raises(UserError) as err:
        load_topology(path)
    assert "over the 1024 KiB limit" in err.value.message and str(path) in err.value.message


def test_a_value_over_64_kib_is_refused_with_its_position() -> None:
    text = "name: x\nmodel: {path: " + "a" * (MAX_SCALAR_CHARS + 1) + "}\n"
    with pytest.raises(UserError) as err:
        load_topology_text(text, source="t.yaml")
    assert err.value.message.startswith("t.yaml:2:15: a value of 65537 characters")


@pytest.mark.parametrize("text,where", [
    ("name: x\nmodel:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)), "t.yaml:66:"),
    ("name: x\nmodel: " + "[" * 100000 + "]" * 100000 + "\n", "t.yaml:2:"),
])
def test_nesting_over_64_levels_is_refused_with_its_position(text: str, where: str) -> None:
    with pytest.raises(UserError) as err:
        load_topology_text(text, source="t.yaml")
    assert err.value.message.startswith(where) and "nesting deeper than 64 levels" in err.value.message


def test_cli_exit_2_with_the_error_document(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text("name: " + "a" * 1_000_000 + "\n")
    out = tmp_path / "err.json"
    done = pdctl("check-compat", str(path), "--json", str(out), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    doc = json.loads(out.read_text())
    assert doc == {"ok": False, "error": f"{path}:1:7: a value of 1000000 characters, over the 64 KiB limit "
                                        "of one topology value"}
