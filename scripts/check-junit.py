#!/usr/bin/env python3
"""Second opinion on a pytest run, from its JUnit XML: exit 1 unless tests ran and none failed or errored
(and, with --no-skips, none was skipped). Used by .ci/run after `make test`, so that CI cannot go green on
an exit code alone (an exit-code lie once hid failing tests here: pdctl issue 10). With --times it also prints
where the time went: seconds per test directory and the slowest modules (setup + call + teardown of their
tests, summed over the workers: the suite's cost, not its wall time).

    scripts/check-junit.py REPORT.xml [--no-skips] [--times]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def counts(path: str) -> dict[str, int]:
    """tests/failures/errors/skipped summed over every <testsuite> of the report."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def times(path: str, top: int = 15) -> str:
    """Seconds per test directory and per module (the slowest TOP), from the testcases' classnames and times."""
    per_module: dict[str, float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "?").split("::")[0]
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):  # a class name after the module's
            parts.pop()
        name = "/".join(parts) + ".py" if parts else module
        per_module[name] = per_module.get(name, 0.0) + float(case.get("time") or 0.0)
    per_dir: dict[str, float] = {}
    for name, secs in per_module.items():
        folder = name.rsplit("/", 1)[0] if "/" in name else name
        per_dir[folder] = per_dir.get(folder, 0.0) + secs
    lines = [f"check-junit: {sum(per_module.values()):.0f} s of tests in all; per directory:"]
    lines += [f"  {secs:8.0f} s  {folder}" for folder, secs in sorted(per_dir.items(), key=lambda kv: -kv[1])]
    lines.append(f"check-junit: the {top} slowest modules:")
    lines += [f"  {secs:8.0f} s  {name}" for name, secs in sorted(per_module.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        c = counts(argv[0])
    except (OSError, ET.ParseError) as exc:
        print(f"check-junit: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 1
    no_skips = "--no-skips" in argv[1:]
    if "--times" in argv[1:]:
        print(times(argv[0]))
    print(f"check-junit: {c['tests']} tests, {c['failures']} failed, {c['errors']} errors, {c['skipped']} skipped")
    bad = c["tests"] == 0 or c["failures"] or c["errors"] or (no_skips and c["skipped"])
    if bad:
        print("check-junit: FAILED (no test ran, or some failed, errored or were skipped)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
