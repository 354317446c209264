"""The knowledge base against real log lines (tests/diagnose/fixtures.py): every signature has a line, each line
is matched first by its own signature and by no other that comes before it; every entry is complete."""

from __future__ import annotations

import re
import typing

import pytest

from pdctl.diagnose import CATALOGUE
from pdctl.diagnose.match import first_hit
from pdctl.diagnose.signature import COMPONENTS, SEVERITIES
from pdctl.topology.model import Topology
from tests.diagnose.fixtures import LINES

BY_ID = {s.id: s for s in CATALOGUE}


def test_ids_are_unique_and_every_signature_has_a_fixture_line() -> None:
    assert len(BY_ID) == len(CATALOGUE)
    assert set(BY_ID) == {sig_id for sig_id, _, _ in LINES}


@pytest.mark.parametrize(("sig_id", "where", "line"), LINES, ids=[f"{i}-{n}" for n, (i, _, _) in enumerate(LINES)])
def test_a_real_line_is_diagnosed_as_its_signature(sig_id: str, where: str, line: str) -> None:
    hit = first_hit([line], CATALOGUE)
    assert hit is not None, f"no signature matches {line!r} ({where})"
    assert hit.signature.id == sig_id, f"{line!r} ({where}) read as {hit.signature.id}, not {sig_id}"


@pytest.mark.parametrize("line", [
    "[2026-12-03 10:40:02] INFO:     127.0.0.1:5555 - \"GET /health HTTP/1.1\" 200 OK",
    "[2026-12-03 10:40:02 TP0] Prefill batch. #new-seq: 1, #new-token: 4, #cached-token: 0, token usage: 0.00",
    "2026-12-03 10:40:02  INFO sglang_router_rs::server: Starting router on 0.0.0.0:30000",
    "[2026-12-03 10:40:02] KV Cache is allocated. #tokens: 510299, K size: 35.04 GB, V size: 35.04 GB",
    "2026-12-03 10:40:02,123 INFO pdctl.reference.roles.decode: room 7: asking prefill 127.0.0.1:9001 for its KV",
    # Slurm cancelling a job or step without a reason of its own: what `pdctl down` (scancel) leaves in the logs
    "slurmstepd: error: *** JOB 1234 ON gb200-01 CANCELLED AT 2026-01-01T10:00:00 ***",
    "slurmstepd: error: *** STEP 1234.0 ON gb200-01 CANCELLED AT 2026-01-01T10:00:00 ***",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
])
def test_a_healthy_line_matches_no_signature(line: str) -> None:
    assert first_hit([line], CATALOGUE) is None


@pytest.mark.parametrize("sig", CATALOGUE, ids=lambda s: s.id)
def test_every_entry_is_complete(sig) -> None:
    assert sig.component in COMPONENTS and sig.severity in SEVERITIES
    assert sig.cause and sig.fix and sig.source
    assert sig.blames in (None, "prefill", "decode", "worker", "rank", "job", "any")
    assert sig.report is None or re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", sig.report)
    # release ranges belong to SGLang's own words only
    assert (sig.first is None and sig.fixed is None) or sig.component.startswith("SGLang")
    re.compile(sig.pattern)


def test_release_ranges_read_off_the_wheels() -> None:
    assert BY_ID["sglang-nixl-hetero-tp-host"].releases == "SGLang >= 0.5.15"
    assert BY_ID["sglang-no-space-one-request"].releases == "SGLang before 0.5.7"
    assert BY_ID["sglang-hetero-tp-hybrid"].releases == "SGLang >= 0.5.4"
    assert BY_ID["sglang-waiting-timeout"].releases.startswith("every release read")
    assert BY_ID["nixl-err-backend"].releases == ""


def _keys(model: type) -> set[str]:
    """The keys of a topology section's model (a union's model members' keys together)."""
    members = typing.get_args(model) or (model,)
    return {k for m in members if hasattr(m, "model_fields") for k in m.model_fields}


def test_every_topology_key_a_fix_names_exists() -> None:
    # a fix that says "raise slurm.time" sends the user to a key the topology refuses (it is slurm.time_limit)
    sections = Topology.model_fields
    named = [(s.id, m.group(1), m.group(2)) for s in CATALOGUE
             for m in re.finditer(r"\b([a-z_]+)\.([a-z_]+)\b", s.fix) if m.group(1) in sections]
    assert len(named) >= 10  # the catalogue's fixes do name keys: this test reads them
    wrong = [(sig, f"{section}.{key}") for sig, section, key in named
             if key not in _keys(sections[section].annotation)]
    assert not wrong, wrong
