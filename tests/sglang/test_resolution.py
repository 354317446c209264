"""The start-up differential: SGLang's own argument resolution vs check-compat, per release, on generated topologies.

For every generated topology (tests/support/resolution_topologies.py) pdctl renders the deployment; each role's
command line goes to SGLang's resolution (tests/support/sglang_resolution_oracle.py: parser, ServerArgs,
resolve_once, check_server_args, with the GPU's facts supplied) in the release judged. SGLang refusing a command
line that check-compat passes at its start-up stage ("argument parsing") is a false pass; check-compat refusing
at that stage a topology whose every command line SGLang starts is a false rejection. Either fails the test, and
a start-up refusal must carry SGLang's message verbatim. `make test` runs a seeded sample per release; the full
sweep is `make resolution-sweep` (the same test with PDCTL_RESOLUTION_SAMPLE=400).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pdctl.compat.evaluate import evaluate
from pdctl.compat.table import ARGS
from tests.support.resolution_topologies import generate, sglang_argv, write_models
from tests.support.sglang_env import RESOLUTION_RELEASES, Oracle, release_worker

pytestmark = pytest.mark.e2e  # starts the SGLang side interpreter

SEED = 37
SAMPLE = int(os.environ.get("PDCTL_RESOLUTION_SAMPLE", "16"))  # topologies per release in `make test`


@pytest.fixture(scope="module", params=RESOLUTION_RELEASES)
def resolution_oracle(request: pytest.FixtureRequest, sglang_python: str):
    """(release, SGLang's resolution of that release): 0.5.23 is the side venv's own, older ones its overlay."""
    yield from release_worker(request.param, sglang_python, "sglang_resolution_oracle.py")


def differential(version: str, oracle: Oracle, n: int, root: Path) -> dict[str, Any]:
    """Judge N generated topologies both ways; the counts and the disagreements."""
    drawn = generate(SEED, n, write_models(root), version)
    cases = [{"argv": sglang_argv(argv), "gpu": d["gpu"], "env": d["env"][role]}
             for d in drawn for role, argv in d["roles"].items()]
    answered = oracle.ask("resolve", cases)
    assert all(a["verdict"] in ("starts", "refuses") for a in answered), answered[0]
    answers = iter(answered)
    out: dict[str, Any] = {"lines": len(cases), "refused": 0, "false_pass": [], "false_reject": [],
                           "wrong_words": [], "sites": Counter()}
    for d in drawn:
        verdicts = {role: next(answers) for role in d["roles"]}
        refusals = {role: v for role, v in verdicts.items() if v["verdict"] == "refuses"}
        for v in refusals.values():
            out["sites"][v["site"]] += 1
        out["refused"] += len(refusals)
        findings = evaluate(d["deployment"], d["spec"])
        ours = [f for f in findings if f.is_error and f.stage == ARGS]
        shape = (Path(d["doc"]["model"]["path"]).name, d["doc"]["nodes"][0]["gpu"], d["doc"]["server"],
                 d["doc"]["prefill"], d["doc"]["decode"])
        if refusals and not ours:
            out["false_pass"].append((shape, refusals))
        elif ours and not refusals:
            out["false_reject"].append((shape, [f.message for f in ours]))
        elif refusals:
            said = " ".join(f.message for f in ours)
            missing = [v["error"] for v in refusals.values() if not said_by_us(v, said)]
            if missing:
                out["wrong_words"].append((shape, missing, said))
    return out


def said_by_us(refusal: dict[str, Any], said: str) -> bool:
    """Whether check-compat's messages carry SGLang's refusal: the message verbatim; for argparse's refusal
    ("sglang serve: error: unrecognized arguments: --x 1", pdctl's flags-parse in its own words) every flag it
    names."""
    words = refusal["error"].split(": ", 1)[1]
    if refusal["site"] != "argparse":
        return words in said
    flags = re.findall(r"--[a-z0-9][a-z0-9-]*", words)
    return bool(flags) and all(flag in said for flag in flags)


def check(result: dict[str, Any]) -> None:
    problems = [f"false pass: {x}" for x in result["false_pass"][:5]]
    problems += [f"false rejection: {x}" for x in result["false_reject"][:5]]
    problems += [f"not SGLang's words: {x}" for x in result["wrong_words"][:5]]
    assert not problems, "\n".join(problems)
    assert result["lines"] > 0


def test_sample_agrees_with_sglang(resolution_oracle, tmp_path: Path, capsys) -> None:
    version, oracle = resolution_oracle
    result = differential(version, oracle, SAMPLE, tmp_path)
    with capsys.disabled():
        print(f"\nresolution {version}: {result['lines']} command lines, {result['refused']} refused by SGLang; "
              f"sites {dict(result['sites'])}")
    assert result["refused"] > 0, "the sample must include start-up refusals (the test must be able to say no)"
    check(result)
