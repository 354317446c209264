"""check-compat's human output is something to act on (issue 20): a failing topology ends with each failure
and its fix in the compact 'rule (SGLang fails at: stage): message (fix: ...)' form, the transfer plan of a
topology SGLang will not run is not shown, rule names are never split across lines, and `-q` shows only
what fails."""

from __future__ import annotations

import re

from pdctl.compat.table import RULES
from tests.compat.test_cli import pdctl

INVALID = "configs/invalid/hetero-tp-swa-layout.yaml"
NARROW = {"COLUMNS": "100"}
COMPACT = re.compile(r"^- hetero-tp-swa-layout \(SGLang fails at: first transfer\): Head-sliced PD transfer needs "
                     r"the NHD KV cache layout.* \(fix: use kv_layout: nhd on both roles.*\)$")
# the same HND layout: SGLang's servers refuse it for PD at startup, before any transfer (listed last: table order)
COMPACT_PD = re.compile(r"^- kv-layout-pd \(SGLang fails at: model load\): .*HND.* \(fix: use kv_layout: nhd .*\)$")


def test_a_failing_topology_ends_with_its_failures_and_fixes() -> None:
    done = pdctl("check-compat", INVALID, env=NARROW)
    assert done.returncode == 1
    lines = (done.stdout + done.stderr).rstrip("\n").splitlines()
    assert COMPACT.match(lines[-2]) and COMPACT_PD.match(lines[-1]), lines[-4:]
    assert "incompatible (2 error(s))" in lines[-3]
    assert "KV head ownership" not in done.stdout and "descr / bytes" not in done.stdout
    assert "no head map or transfer plan: the topology is incompatible" in done.stdout
    # about 1.5 lines per rule at 100 columns (a passing rule's message wraps at most once or twice): was 123 lines
    # for 43 rules before the table was compacted, 94 for 47 (two failing), 108 for 56, 118 for 61
    assert len(lines) < 30 + 1.5 * len(RULES)


def test_rule_names_are_never_split_across_lines() -> None:
    done = pdctl("check-compat", INVALID, env=NARROW)
    cells = [line.split("│")[1].strip() for line in done.stdout.splitlines() if line.startswith("│")]
    named = [c for c in cells if c]
    assert sorted(named) == sorted(rule.id for rule in RULES)


def test_failures_only_view() -> None:
    done = pdctl("check-compat", "-q", INVALID, env=NARROW)
    assert done.returncode == 1
    assert "│" not in done.stdout + done.stderr and "model" not in done.stdout
    lines = done.stderr.rstrip("\n").splitlines()
    assert COMPACT.match(lines[-2]) and COMPACT_PD.match(lines[-1]), lines[-3:]
    done = pdctl("check-compat", "--failures-only", "configs/local-cpu.yaml")
    assert done.returncode == 0 and done.stdout.strip() == f"compatible: local-cpu passes all {len(RULES)} rules"


def test_fired_warnings_are_listed_with_their_fix() -> None:
    done = pdctl("check-compat", "configs/local-cpu.yaml", "--set", "prefill.args.enable-mixed-chunk=true", env=NARROW)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").splitlines()
    assert lines[-1] == f"compatible: local-cpu passes all {len(RULES)} rules"
    assert re.match(r"^warning: reference-ignores-args \(SGLang fails at: not rendered\): .*--enable-mixed-chunk.*"
                    r"\(fix: remove the flag from args:.*\)$", lines[-2])
