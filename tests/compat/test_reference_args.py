"""A CPU rehearsal judges the flags the real run would get (issue 20): a reference topology's `args:` are
parsed with SGLang's flag table of the topology's release too (a misspelling is rejected with did-you-mean, as
with engine.kind: sglang, where it used to pass because the reference parser keeps unknown flags), an SGLang
flag the reference engine ignores is a loud warning, and the engine's own knobs stay allowed."""

from __future__ import annotations

import json

from tests.compat.test_cli import pdctl

LOCAL = "configs/local-cpu.yaml"


def _report(*overrides: str) -> tuple[int, dict, str]:
    done = pdctl("check-compat", LOCAL, *[a for o in overrides for a in ("--set", o)], "--json", "-")
    return done.returncode, json.loads(done.stdout), done.stderr


def _finding(doc: dict, rule: str) -> dict:
    return next(f for f in doc["findings"] if f["rule"] == rule)


def test_a_misspelled_flag_fails_as_it_would_on_sglang() -> None:
    code, doc, _ = _report("prefill.args.max-runing-requests=8")
    assert code == 1
    message = _finding(doc, "flags-parse")["message"]
    assert "prefill-0: unrecognized argument --max-runing-requests (not a flag of SGLang 0.5.23); did you mean " \
           "--max-running-requests?" in message
    sglang = pdctl("check-compat", "configs/gpt-oss-20b-p2-d1-h100-nixl.yaml", "--set",
                   "prefill.args.max-runing-requests=8", "-q")  # the same mistake on SGLang: the same verdict
    assert sglang.returncode == 1 and "did you mean --max-running-requests?" in sglang.stderr


def test_an_sglang_flag_the_reference_engine_ignores_is_a_loud_warning(tmp_path) -> None:
    code, doc, _ = _report("server.args.max-running-requests=8")
    assert code == 0
    finding = _finding(doc, "reference-ignores-args")
    assert finding["severity"] == "warning" and not finding["ok"]
    assert "the reference engine ignores --max-running-requests" in finding["message"]
    launch = pdctl("launch", LOCAL, "--dry-run", "--set", "server.args.max-running-requests=8", "--run-dir",
                   str(tmp_path / "run"))
    assert launch.returncode == 0, launch.stderr
    assert "warning: reference-ignores-args (SGLang fails at: not rendered): the reference engine ignores " \
           "--max-running-requests" in " ".join(launch.stderr.split())


def test_the_reference_engines_own_knobs_are_allowed_and_close_ones_suggested() -> None:
    code, doc, _ = _report("server.args.numerics=gpu-like", "server.args.schedule-conservativeness=0.5")
    assert code == 0 and _finding(doc, "reference-ignores-args")["ok"]
    code, doc, _ = _report("server.args.numerix=gpu-like")
    assert code == 1 and "did you mean --numerics (a reference-engine flag)?" in _finding(doc, "flags-parse")["message"]
