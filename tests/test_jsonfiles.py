"""pdctl.jsonfiles: every way a user's JSON / JSONL file can be bad is a UserError naming the file (and line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.jsonfiles import iter_jsonl, read_json_object


def test_jsonl_yields_line_numbers_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2, 3]\n"x"\n', encoding="utf-8")
    assert list(iter_jsonl(path, "test file")) == [(1, {"a": 1}), (4, [2, 3]), (5, "x")]


def test_jsonl_lines_end_at_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"t": "a\u2028b\x85c"}\r\n{"t": 2}\n', encoding="utf-8", newline="")
    assert list(iter_jsonl(path, "test file")) == [(1, {"t": "a\u2028b\x85c"}), (2, {"t": 2})]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": 1}\n{"a": \n', r"a\.jsonl:2: not valid JSON"),
        (b'\xff\xfe{"a": 1}\n', r"a\.jsonl: not valid JSON"),
    ],
)
def test_jsonl_bad_content(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        list(iter_jsonl(path, "test file"))


def test_jsonl_missing_file_names_what_it_is(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"cannot read --prompts file .*nope\.jsonl"):
        list(iter_jsonl(tmp_path / "nope.jsonl", "--prompts file"))


def test_json_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 128}', encoding="utf-8")
    assert read_json_object(path, "model config") == {"hidden_size": 128}
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(UserError, match="expected a JSON object in a model config, got list"):
        read_json_object(path, "model config")
    path.write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="config.json: not valid JSON"):
        read_json_object(path, "model config")
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(UserError, match="not valid JSON"):
        read_json_object(path, "model config")


def test_json_object_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read model config"):
        read_json_object(tmp_path / "config.json", "model config")
    with pytest.raises(UserError, match=r"config\.json: no config\.json \(create one"):
        read_json_object(tmp_path / "config.json", "config.json", missing_hint="no config.json (create one)")
