"""The documentation only points at files that are in the repository (issue 20: docs/topology.md cited a spec
file a user of the repository does not have)."""

from __future__ import annotations

import re

from tests.support.paths import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MD_REF = re.compile(r"(?<![\w.-])((?:\.\./|\./)?[\w./-]*[A-Za-z0-9_-]\.md)\b")


def test_every_markdown_file_named_in_the_docs_exists() -> None:
    missing = []
    for doc in DOCS:
        for lineno, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for name in MD_REF.findall(line):
                name = name.split("#")[0]
                candidates = [doc.parent / name, REPO / name, REPO / "docs" / name]
                if not any(c.is_file() for c in candidates):
                    missing.append(f"{doc.relative_to(REPO)}:{lineno}: {name}")
    assert not missing, "\n".join(missing)
