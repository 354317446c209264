"""Topologies of older SGLang releases are judged by their own release's parser (issue 27, item 7): the report
names the table, what came later fails, what was deprecated later is plain, and SGLang's words follow the
release (0.5.5-0.5.8 are what srt-slurm's recipes run)."""

from __future__ import annotations

from typing import Any

import pytest

from pdctl.compat import compat_report
from tests.support.topo_factory import rendered


def report(**over: Any) -> dict[str, Any]:
    deployment, spec = rendered(**over)
    return compat_report(deployment, spec, 1024)


def finding(doc: dict[str, Any], rule: str) -> dict[str, Any]:
    return next(f for f in doc["findings"] if f["rule"] == rule)


@pytest.mark.parametrize("version", ["0.5.0rc2", "0.5.5.post2", "0.5.8", "0.5.8.post1", "0.5.13.post1"])
def test_the_report_names_the_table_that_judged_it(version: str) -> None:
    doc = report(engine={"version": version})
    assert doc["sglang"]["table"] == version and doc["sglang"]["note"] is None
    assert finding(doc, "flags-parse")["ok"], finding(doc, "flags-parse")["message"]


def test_a_release_between_tables_is_judged_by_the_older_one_and_said_so() -> None:
    doc = report(engine={"version": "0.5.8.post2"})
    assert doc["sglang"]["table"] == "0.5.8.post1" and "no flag table for SGLang 0.5.8.post2" in doc["sglang"]["note"]


def test_a_flag_added_after_the_release_fails_on_it() -> None:
    later = {"decode": {"radix_cache": True}}  # --disaggregation-decode-enable-radix-cache
    old = finding(report(engine={"version": "0.5.8"}, **later), "flags-parse")
    assert not old["ok"] and "not a flag of SGLang 0.5.8" in old["message"]
    assert "only exists since SGLang" in old["message"]
    assert finding(report(engine={"version": "0.5.23"}, **later), "flags-parse")["ok"]


def test_no_deprecation_from_a_later_release() -> None:
    """--cuda-graph-max-bs is a plain flag of 0.5.8 (srt-slurm's recipes set it); 0.5.16 deprecated it."""
    args = {"server": {"args": {"cuda-graph-max-bs": 256}}}
    old = finding(report(engine={"version": "0.5.8"}, **args), "flags-deprecated")
    assert old["ok"] and "0.5.16" not in old["message"], old["message"]
    new = finding(report(engine={"version": "0.5.16"}, **args), "flags-deprecated")
    assert not new["ok"] and "deprecated in SGLang 0.5.16" in new["message"]
