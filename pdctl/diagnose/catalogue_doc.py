"""docs/diagnose.md's table of signatures, generated from the knowledge base (one source: the data). The page's
text outside the markers is written by hand; tests/diagnose/test_docs.py fails when the table is stale
(`python -m pdctl.diagnose.catalogue_doc docs/diagnose.md` rewrites it)."""

from __future__ import annotations

import sys
from pathlib import Path

from pdctl.diagnose import CATALOGUE
from pdctl.diagnose.signature import COMPONENTS

BEGIN, END = "<!-- signatures: generated -->", "<!-- /signatures -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table() -> str:
    """Every signature, by component: id, the words it matches, cause, fix, source, releases, report."""
    out = []
    for component in COMPONENTS:
        sigs = [s for s in CATALOGUE if s.component == component]
        if not sigs:
            continue
        out += [f"### {component}", "", "| id | matches (regex) | cause | fix | source | report |",
                "|---|---|---|---|---|---|"]
        for s in sigs:
            who = "another process's" if s.blames == "any" else f"a {s.blames}"
            cause = s.cause + (f" (follows {who} failure)" if s.blames else "") + (
                " *warning: not a failure alone*" if s.severity == "warning" else "")
            source = s.source + (f"; releases: {s.releases}" if s.releases else "")
            report = f"[{s.report.split('github.com/')[1]}]({s.report})" if s.report else ""
            out.append(f"| `{s.id}` | `{_cell(s.pattern)}` | {_cell(cause)} | {_cell(s.fix)} | {_cell(source)} "
                       f"| {report} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render(page: str) -> str:
    """PAGE with the text between the markers replaced by the table."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{table()}{END}{tail}"


if __name__ == "__main__":
    path = Path(sys.argv[1])
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
