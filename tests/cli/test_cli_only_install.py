"""The CLI-only install the README offers (`pip install .`, no extras): every command the README says works
there works, and every other one says which extra to install (exit 2) — never a traceback.

The venv is built once per session from this checkout (pip reaches the package index; no torch, no numpy).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.net import free_port
from tests.support.paths import CONFIGS_DIR, DATA, REPO

pytestmark = pytest.mark.e2e  # builds a virtualenv with pip

Run = Callable[..., subprocess.CompletedProcess]


@pytest.fixture(scope="module")
def cli_only(tmp_path_factory: pytest.TempPathFactory) -> Run:
    venv = tmp_path_factory.mktemp("cli-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([str(venv / "bin" / "pip"), "list"], capture_output=True, text=True, check=True)
    for heavy in ("torch", "numpy", "fastapi", "safetensors", "datasets", "matplotlib", "nixl"):
        assert f"\n{heavy} " not in listed.stdout.lower(), f"{heavy} was installed by `pip install .`"
    work = tmp_path_factory.mktemp("cli-only-work")

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "pdctl"), *args], capture_output=True, text=True, cwd=work,
                              timeout=timeout, check=False)

    return run


def _ok(done: subprocess.CompletedProcess, code: int) -> str:
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text[-3000:]
    assert done.returncode == code, f"exit {done.returncode}, want {code}\n{text[-3000:]}"
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["check-compat", str(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml")], 0),
        (["check-compat", str(CONFIGS_DIR / "invalid" / "hetero-tp-swa-layout.yaml")], 1),
        (["plan", str(CONFIGS_DIR / "gpt-oss-20b-p2-d1-h100-nixl.yaml"), "--tokens", "8192"], 0),
        (["schema"], 0),
        (["launch", str(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"), "--dry-run"], 0),
        (["reference", "serve", "--help"], 0),
        (["eval", "gsm8k", "--help"], 0),
        (["parity", "--help"], 0),
        (["preflight", "--help"], 0),
        (["bench", "serve", "--help"], 0),
        (["suggest", "--help"], 0),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_what_the_readme_says_works_without_extras(cli_only: Run, args: list[str], code: int) -> None:
    _ok(cli_only(*args), code)


def test_status_logs_down_without_a_run_are_bad_input(cli_only: Run) -> None:
    for command in ("status", "logs", "down"):
        assert "no latest run recorded" in _ok(cli_only(command), 2)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["reference", "init-checkpoint", "{work}/ckpt"], "engine"),
        (["reference", "serve", "--model-path", "{work}/ckpt"], "engine"),
        (["bench-transfer", str(CONFIGS_DIR / "local-cpu.yaml"), "--tokens", "64"], "engine"),
        (["eval", "gsm8k", "--url", "http://127.0.0.1:{port}"], "eval"),
        (["suggest", "--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "8", "--isl", "8192", "--osl",
          "1024", "--ttft", "2000", "--itl", "30"], "suggest"),
        (["launch", str(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-k8s.yaml"), "--dry-run", "--run-dir", "{work}/run"],
         "kubernetes"),
    ],
    ids=["init-checkpoint", "serve", "bench-transfer", "eval-from-the-hub", "suggest", "kubernetes-dry-run"],
)
def test_commands_that_need_an_extra_say_which(cli_only: Run, tmp_path: Path, args: list[str], extra: str) -> None:
    argv = [a.format(work=tmp_path, port=free_port()) for a in args]
    text = _ok(cli_only(*argv), 2)
    assert f"needs the '{extra}' extra" in text and f"pdctl[{extra}]" in text, text
    left = [p for p in ("ckpt", "run") if (tmp_path / p).exists()]
    assert not left, f"a command that cannot run must not leave files behind: {left}"


def test_a_local_launch_says_what_to_install_before_starting_anything(cli_only: Run, tmp_path: Path) -> None:
    """Issue 16: a local router rendered as `python -m sglang_router.launch_router` on an install without
    sglang_router. The dry run still shows the plan but warns; the launch is refused (exit 2) up front."""
    topo = CONFIGS_DIR / "local-cpu.yaml"
    dry = _ok(cli_only("launch", str(topo), "--dry-run", "--run-dir", str(tmp_path / "dry")), 0)
    assert "warning:" in dry and "needs the 'engine' extra" in dry and "sglang_router" in dry, dry
    text = _ok(cli_only("launch", str(topo), "--run-dir", str(tmp_path / "run"), "--skip-preflight"), 2)
    assert "needs the 'engine' extra" in text and "pdctl[engine]" in text, text
    assert not (tmp_path / "run" / "state.json").exists(), "nothing may start"


def test_preflight_of_a_local_reference_topology_names_what_this_python_lacks(cli_only: Run) -> None:
    """The node check is honest on a CLI-only install: the engine's interpreter (this one) has no torch and no
    sglang-router, so preflight fails (exit 1) saying so, instead of a traceback or a pass."""
    text = _ok(cli_only("preflight", str(CONFIGS_DIR / "local-cpu.yaml"), "--skip-transfer"), 1)
    assert "torch is not installed" in text and "sglang-router is not installed" in text, text


def test_eval_with_a_data_file_needs_no_extra(cli_only: Run) -> None:
    port = free_port()  # nothing listens there: the eval gets as far as the server, which is bad input
    text = _ok(cli_only("eval", "gsm8k", "--url", f"http://127.0.0.1:{port}", "--data-file",
                        str(DATA / "gsm8k_test_50.jsonl")), 2)
    assert "unreachable" in text or "cannot reach" in text or "refused" in text, text
