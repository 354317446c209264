"""docs/diagnose.md lists every signature, generated from the knowledge base (one source)."""

from __future__ import annotations

from pdctl.diagnose import CATALOGUE
from pdctl.diagnose.catalogue_doc import render
from tests.support.paths import REPO


def test_the_page_lists_every_signature_as_the_data_says() -> None:
    page = (REPO / "docs" / "diagnose.md").read_text(encoding="utf-8")
    assert render(page) == page, "docs/diagnose.md is stale: python -m pdctl.diagnose.catalogue_doc docs/diagnose.md"
    for sig in CATALOGUE:
        assert f"| `{sig.id}` |" in page
