"""Real `sglang.launch_server` failures (SGLang 0.5.23 in the side venv) read by diagnose: a misspelled flag and
a model path that does not exist. The server's own output is the log; its exit is pdctl's status line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pdctl.diagnose.explain import ProcessLog, explain
from pdctl.diagnose.kb_platform import EXIT_LINE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("args", "signature"), [
    (["--model-path", "/nonexistent/model", "--mem-fracton-static", "0.5"], "sglang-bad-flag"),
    (["--model-path", "/nonexistent/model", "--device", "cpu", "--host", "127.0.0.1", "--port", "0"],
     "sglang-bad-model-path"),
])
def test_a_real_sglang_server_failure_is_diagnosed(tmp_path: Path, sglang_python: str, args: list[str],
                                                  signature: str) -> None:
    log = tmp_path / "prefill-0.log"
    with log.open("w") as out:
        done = subprocess.run([sglang_python, "-m", "sglang.launch_server", *args], stdout=out,
                              stderr=subprocess.STDOUT, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode != 0
    found = explain([ProcessLog("prefill-0", "prefill", 0, "local", log.read_text().splitlines(),
                                [EXIT_LINE.format(code=done.returncode, signal="")], failed=True)])
    assert found.failed and found.root is not None
    assert found.root.what == signature, (found.summary(), log.read_text()[-2000:])
    assert found.root.signature.fix and "no known cause" not in found.summary()
