"""The README's tour, command by command, as a new user runs it after the README's own set-up (issue 20: it
ended in a traceback at `pdctl bench serve`). Every command must end with the exit code the README gives it
(0 unless its comment says `exit N`) and print no traceback.

It runs in a private network namespace (the tour's topologies use fixed ports, which must not meet another
test's), from a directory holding the checkout's configs/ and tests/ (what the commands name), with pdctl and
SGLang's side venv (`make sglang-env`, PDCTL_SGLANG_PYTHON) as the README's set-up leaves them."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import netns_missing_reason
from tests.support.paths import REPO
from tests.support.sglang_env import sglang_python

pytestmark = [pytest.mark.e2e]
EXIT = re.compile(r"#.*\bexit (\d)\b")


def tour_commands(readme: str) -> list[tuple[str, int]]:
    """(command, expected exit code) of each line of the README's tour block."""
    section = readme.split("## A 5-minute tour", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        expected = EXIT.search(text)
        command = re.split(r"\s#", text, maxsplit=1)[0].strip()  # a trailing comment (none of them quotes a #)
        out.append((command, int(expected.group(1)) if expected else 0))
    return out


def test_the_tour_is_found() -> None:
    commands = tour_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(commands) >= 10 and all(c.startswith(("pdctl ", "curl ")) for c, _ in commands)
    assert ("pdctl check-compat configs/invalid/hetero-tp-swa-layout.yaml", 1) in commands


def test_every_command_of_the_readme_tour(tmp_path: Path) -> None:
    why = netns_missing_reason()
    if why is not None:
        pytest.skip(f"the tour's fixed ports need a private network namespace: {why}")
    side = sglang_python()
    if side is None:
        pytest.skip("SGLang's side venv (`make sglang-env`, README's set-up) is not built")
    for name in ("configs", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    commands = tour_commands((REPO / "README.md").read_text(encoding="utf-8"))
    log = tmp_path / "tour.jsonl"
    lines = ["ip link set lo up", "trap 'pdctl down >/dev/null 2>&1' EXIT"]
    for i, (command, _) in enumerate(commands):
        lines.append(f"s=$(date +%s%N); {command} > out.{i} 2>&1; rc=$?; e=$(date +%s%N); "
                     f"echo \"{i} $rc $(( (e - s) / 1000000 ))\" >> {log}")
    script = tmp_path / "tour.sh"
    script.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PDCTL_SGLANG_PYTHON": side,
           "COLUMNS": "120"}
    try:
        done = subprocess.run(["unshare", "-n", "bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=1800, check=False)
    finally:
        run = tmp_path / ".pdctl" / "runs" / "local-cpu"
        if (run / "state.json").exists():
            from pdctl.launch.shutdown import teardown

            teardown(run, grace_s=5)
    results = [dict(zip(("i", "rc", "ms"), map(int, line.split()))) for line in log.read_text().splitlines()] \
        if log.exists() else []
    assert len(results) == len(commands), done.stderr
    bad = []
    for (command, expected), result in zip(commands, results):
        output = (tmp_path / f"out.{result['i']}").read_text(errors="replace")
        if result["rc"] != expected or "Traceback" in output:
            bad.append(f"{shlex.quote(command)}: exit {result['rc']} (README: {expected})\n{output[-3000:]}")
    assert not bad, "\n\n".join(bad)
