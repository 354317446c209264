"""The CPU adaptations against SGLang's installed source (the side venv, SGLang 0.5.23): each finds the code it
answers; one whose code differs is refused before anything is patched; `serve` exits 2 naming it; the kernel
stand-in imports every name and raises on a call."""

from __future__ import annotations

import json
import os
import subprocess

from tests.support.paths import REPO

CHECK = """
import json, sys
from dataclasses import replace
from pdctl.sglang_cpu import adaptations as a
from pdctl.sglang_cpu.kernel_standin import KernelCalled, install
install()
out = {ad.name: a.verify(ad) for ad in (a.KERNEL_STANDIN, a.NIXL_HOST_MEMORY, a.MOONCAKE_HOST_INDICES,
                                        a.GPT_OSS_SINKS_IGNORED)}
changed = replace(a.NIXL_HOST_MEMORY, expects=(a.Expect(a._NIXL_CONN, "code SGLang does not have"),))
try:
    a.verify(changed)
    out["mismatch"] = None
except a.AdaptationMismatch as exc:
    out["mismatch"] = str(exc)
from sgl_kernel.kvcacheio import transfer_kv_all_layer
try:
    transfer_kv_all_layer(1)
    out["called"] = None
except KernelCalled as exc:
    out["called"] = str(exc)
print(json.dumps(out))
"""


def run(python: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=240, cwd=REPO, env=env,
                          check=False)


def test_every_adaptation_finds_the_code_it_answers_and_a_changed_one_is_refused(sglang_python):
    done = run(sglang_python, "-W", "ignore", "-c", CHECK)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["nixl-host-memory"][-1].startswith("conn.py:")  # SGLang's own hetero-TP guard is still there
    assert all(out[name] for name in ("sgl-kernel-standin", "mooncake-host-indices", "gpt-oss-sinks-ignored"))
    assert "no longer matches this SGLang" in out["mismatch"] and "nixl-host-memory" in out["mismatch"]
    assert "sgl_kernel.kvcacheio.transfer_kv_all_layer was called" in out["called"]


def test_serve_refuses_a_release_it_does_not_match_with_exit_2(sglang_python, tmp_path):
    # a conn.py without the code the NIXL adaptation answers, first on the path: SGLang's own package otherwise
    fake = tmp_path / "sglang" / "srt" / "disaggregation" / "nixl"
    real = run(sglang_python, "-c", "import sglang, os; print(os.path.dirname(sglang.__file__))").stdout.strip()
    for rel in ("", "srt", "srt/disaggregation", "srt/disaggregation/nixl"):
        (tmp_path / "sglang" / rel).mkdir(parents=True, exist_ok=True)
    (tmp_path / "sglang" / "__init__.py").write_text(f"__path__ = [{str(tmp_path / 'sglang')!r}, {real!r}]\n")
    for rel in ("srt", "srt/disaggregation"):
        (tmp_path / "sglang" / rel / "__init__.py").write_text(
            f"__path__ = [{str(tmp_path / 'sglang' / rel)!r}, {os.path.join(real, rel)!r}]\n")
    (fake / "__init__.py").write_text("")
    (fake / "conn.py").write_text("# not SGLang's NIXL manager\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    done = subprocess.run([sglang_python, "-m", "pdctl.sglang_cpu.serve", "--model-path", str(tmp_path),
                           "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"],
                          capture_output=True, text=True, timeout=240, cwd=REPO, env=env, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "nixl-host-memory" in done.stderr and "Traceback" not in done.stderr


KINDS = """
import json
from pdctl.sglang_cpu import adaptations as a
from pdctl.sglang_cpu.kernel_standin import install
install()
a.NIXL_HOST_MEMORY.apply()
from sglang.srt.disaggregation.nixl import conn
print(json.dumps({"stated": conn._normalize_kv_mem_kinds(["VRAM", "VRAM"], 2),
                  "default": conn._normalize_kv_mem_kinds(None, 2),
                  "host": conn._normalize_kv_mem_kinds(["DRAM"], 1)}))
"""


def test_nixl_host_memory_labels_decodes_stated_kv_kinds_as_host_memory(sglang_stack_python):
    # decode states ["VRAM"] * n for its KV (disaggregation/decode.py:629) and sends them to prefill, whose guard
    # refuses heterogeneous TP into host memory only when it reads DRAM there: left VRAM, the guard was bypassed
    # and NIXL TP2 -> TP1 served on CPU nodes while check-compat (nixl-hetero-tp-host-memory) said it cannot
    done = run(sglang_stack_python, "-W", "ignore", "-c", KINDS)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"stated": ["DRAM", "DRAM"], "default": ["DRAM", "DRAM"], "host": ["DRAM"]}
