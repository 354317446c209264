"""Where parity's tolerance and generation length come from: the command line, else the candidate run's
topology (eval.parity, as `eval gsm8k` reads eval.gsm8k), else the built-in defaults; a run whose recorded
topology is gone is refused rather than silently judged with other settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdctl.errors import UserError
from pdctl.parity.session import PARITY_DEFAULTS, ParityRequest, settings
from pdctl.runs.state import TOPOLOGY_COPY
from pdctl.target import Target

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local-cpu-reference.yaml"


def run_with_parity_block(tmp_path: Path, block: dict) -> Target:
    doc = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    doc.setdefault("eval", {})["parity"] = block
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / TOPOLOGY_COPY).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return Target(url="http://127.0.0.1:1", run_dir=run_dir, state={})


def test_the_run_topology_gives_what_the_command_line_leaves_out(tmp_path):
    candidate = run_with_parity_block(tmp_path, {"max_new_tokens": 7, "tolerance": 0.2})
    req, source = settings(ParityRequest(reference_url="http://127.0.0.1:2"), candidate)
    assert (req.max_new_tokens, req.tolerance) == (7, 0.2)
    assert source == f"eval.parity of {candidate.run_dir / TOPOLOGY_COPY}"
    req, _ = settings(ParityRequest(reference_url="http://127.0.0.1:2", tolerance=0.01), candidate)
    assert (req.max_new_tokens, req.tolerance) == (7, 0.01)  # the command line wins, per setting
    req, source = settings(ParityRequest(max_new_tokens=3, tolerance=0.0), candidate)
    assert (req.max_new_tokens, req.tolerance, source) == (3, 0.0, "the command line")


def test_a_topology_without_an_eval_block_and_a_url_get_the_built_in_defaults(tmp_path):
    candidate = run_with_parity_block(tmp_path, {})
    req, _ = settings(ParityRequest(), candidate)
    assert (req.max_new_tokens, req.tolerance) == (PARITY_DEFAULTS["max_new_tokens"], PARITY_DEFAULTS["tolerance"])
    req, source = settings(ParityRequest(), Target(url="http://127.0.0.1:1"))
    assert (req.max_new_tokens, req.tolerance, source) == (32, 0.05, "built-in defaults")


def test_a_run_whose_recorded_topology_is_gone_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    gone = Target(url="http://127.0.0.1:1", run_dir=run_dir, state={"topology_path": str(tmp_path / "gone.yaml")})
    with pytest.raises(UserError, match="cannot be read any more"):
        settings(ParityRequest(), gone)
