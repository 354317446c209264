#!/usr/bin/env python3
"""Second opinion on a pytest run, from its JUnit XML: exit 1 unless tests ran and none failed or errored
(and, with --no-skips, none was skipped). Used by .ci/run after `make test`, so that CI cannot go green on
an exit code alone (an exit-code lie once hid failing tests here: pdctl issue 10).

    scripts/check-junit.py REPORT.xml [--no-skips]
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
    print(f"check-junit: {c['tests']} tests, {c['failures']} failed, {c['errors']} errors, {c['skipped']} skipped")
    bad = c["tests"] == 0 or c["failures"] or c["errors"] or (no_skips and c["skipped"])
    if bad:
        print("check-junit: FAILED (no test ran, or some failed, errored or were skipped)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
