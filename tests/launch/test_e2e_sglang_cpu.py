"""End to end on SGLang's REAL server: `pdctl launch configs/local-cpu-sglang.yaml` (SGLang 0.5.23's own
launch_server as prefill TP1 -> decode TP1 on CPU, KV over NIXL, the real sglang-router), then a routed request,
status, logs, eval gsm8k and down, on ONE shared deployment (module-scoped: a PD pair costs ~4 GiB and 30-80 s
to start, and its schedulers busy-poll). Every test fails if the servers were pdctl's reference engine: their
children are SGLang's scheduler/detokenizer processes, /server_info is SGLang's and /metrics carries its series."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from pdctl.compat.capacity import CPU_BASIS
from pdctl.render.cpu import MAX_TOTAL_TOKENS
from pdctl.sglang_cpu import SERVE_MODULE
from pdctl.sglang_cpu.sidevenv import init_model
from tests.support.cpu import idle_share
from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.net import free_port, wait_for
from tests.support.orphans import assert_no_orphans, group_pids, live_pids, started_records
from tests.support.paths import DATA, REPO

# a real server's start-up takes 17-45 s idle and minutes on a loaded machine (the last test launches a second
# PD pair): longer than the suite's default 300 s per phase
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _with_free_ports(doc: dict, model_path: str) -> dict:
    """DOC (a shipped config) on MODEL_PATH and reserved free ports: the shipped ports sit in the kernel's
    ephemeral range."""
    doc["model"]["path"] = model_path
    if "transfer" in doc:
        doc["transfer"]["bootstrap_port"] = free_port()
    for section in ("prefill", "decode", "colocated", "router"):
        if section in doc:
            doc[section]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    return doc


def _launch(tmp: Path, config: str, model_path: str, env: dict, *flags: str) -> tuple[subprocess.Popen, Path]:
    doc = _with_free_ports(yaml.safe_load((REPO / "configs" / config).read_text()), model_path)
    topo = tmp / config
    topo.write_text(yaml.safe_dump(doc))
    run_dir = tmp / ".pdctl" / "runs" / doc["name"]
    proc = subprocess.Popen([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "600",
                             *flags], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, run_dir


def _down(run_dir: Path, cwd: Path) -> None:
    if (run_dir / "state.json").exists():
        for record in started_records(run_dir):  # a failed fault case must not leave a stopped process behind
            try:
                os.killpg(int(record["pgid"]), signal.SIGCONT)
            except (OSError, TypeError, ValueError):
                pass
        down = pdctl("down", "--run-dir", str(run_dir), cwd=cwd, timeout=180)
        assert down.returncode == 0, down.stderr
        assert_no_orphans(run_dir)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, sglang_python: str) -> Iterator[dict]:
    """The launched PD deployment (state.json, run dir, the launch's stderr) and, launched at the same time,
    parity's reference: a colocated real SGLang TP1 server (configs/local-cpu-sglang-reference.yaml). Both are
    always brought down, and checked to leave no process behind."""
    tmp = tmp_path_factory.mktemp("sglang-cpu")
    env = {**os.environ, "PDCTL_SGLANG_PYTHON": sglang_python}
    model = init_model(str(tmp / "tiny-llama"), "llama", 0)
    ref_proc, ref_dir = _launch(tmp, "local-cpu-sglang-reference.yaml", model["path"], env, "--skip-preflight")
    pd_proc, run_dir = _launch(tmp, "local-cpu-sglang.yaml", model["path"], env)
    try:
        _, launch_err = pd_proc.communicate(timeout=900)
        _, ref_err = ref_proc.communicate(timeout=900)
        assert pd_proc.returncode == 0, launch_err[-4000:]
        assert ref_proc.returncode == 0, ref_err[-4000:]
        state = wait_state(run_dir, "running", 60)
        reference = json.loads((ref_dir / "state.json").read_text())["processes"][0]["url"]
        yield {"state": state, "run_dir": run_dir, "cwd": tmp, "env": env, "launch": launch_err,
               "reference": reference, "ref_dir": ref_dir}
    finally:
        for proc in (pd_proc, ref_proc):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        _down(run_dir, tmp)
        _down(ref_dir, tmp)


def _children_titles(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "cmd=", "--ppid", str(pid)], capture_output=True, text=True, check=False)
    return out.stdout.split("\n")


def test_the_servers_are_sglangs_own(deployment: dict) -> None:
    for proc in deployment["state"]["processes"]:
        cmd = Path(f"/proc/{proc['pid']}/cmdline").read_bytes().split(b"\0")
        assert cmd[1:3] == [b"-m", SERVE_MODULE.encode()], cmd[:3]
        titles = " ".join(_children_titles(int(proc["pid"])))
        assert "sglang::scheduler" in titles and "sglang::detokenizer" in titles, titles
        info = requests.get(proc["url"] + "/server_info", timeout=30).json()
        assert info["version"] == "0.5.23" and info["disaggregation_mode"] == proc["role"], info.get("version")
        assert info["device"] == "cpu" and info["attention_backend"] == "torch_native"
        metrics = requests.get(proc["url"] + "/metrics", timeout=30).text
        series = {line.split("{")[0] for line in metrics.splitlines() if line.startswith("sglang:")}
        assert len(series) >= 20 and "sglang:routing_keys_active" in metrics, sorted(series)[:40]
    # launch's preflight moved a request's KV through SGLang's own NIXL stack between the node's servers
    assert "sglang 0.5.23" in " ".join(deployment["launch"].split())


def test_routed_greedy_tokens_are_stable_and_logs_show_the_adaptations(deployment: dict) -> None:
    url = deployment["state"]["router"]["url"]
    first = generate(url, "Natalia sold clips to", max_new_tokens=8)
    again = generate(url, "Natalia sold clips to", max_new_tokens=8)
    assert len(first["output_ids"]) == 8 and first["output_ids"] == again["output_ids"]
    logs = pdctl("logs", "prefill-0", "--run-dir", str(deployment["run_dir"]), cwd=deployment["cwd"])
    assert logs.returncode == 0, logs.stderr
    text = Path(deployment["state"]["processes"][0]["log"]).read_text(errors="replace")
    assert "pdctl CPU adaptations applied: sgl-kernel-standin" in text and "nixl-host-memory" in text


def test_status_reads_sglangs_metrics(deployment: dict) -> None:
    done = pdctl("status", "--run-dir", str(deployment["run_dir"]), "--json", "-", cwd=deployment["cwd"],
                 env=deployment["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    text = json.dumps(doc)
    assert "healthy" in text and "sglang" in text
    # the KV pool SGLang reports, read from SGLang here, beside pdctl's estimate (the render's --max-total-tokens
    # on a CPU node, in tokens and bytes): they agree, and status says so for both servers
    for proc in doc["processes"]:
        reported = requests.get(proc["url"] + "/server_info", timeout=30).json()["max_total_num_tokens"]
        kv = proc["kv_capacity"]
        assert kv["verdict"] == "agrees" and kv["max_total_num_tokens"] == reported == kv["estimate"], kv
        assert kv["estimate"] == MAX_TOTAL_TOKENS and kv["basis"] == CPU_BASIS and kv["estimate_bytes"] > 0, kv
    assert f"KV capacity of decode-0: agrees — {MAX_TOTAL_TOKENS:,} tokens" in " ".join(done.stderr.split())


def test_eval_gsm8k_through_real_sglang(deployment: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--run-dir", str(deployment["run_dir"]), "--data-file",
         str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", "3", "--num-shots", "1", "--max-new-tokens", "8",
         "--parallel", "2", "--deadline", "300", "--json", "-"],
        cwd=deployment["cwd"], capture_output=True, text=True, timeout=600, check=False, env=deployment["env"])
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a random-weight model scores 0: the floor may fail
    summary = json.loads(done.stdout)
    assert summary["asked"] == 3 and summary["errors"] == 0, summary


def test_every_sglang_process_is_in_the_recorded_groups(deployment: dict) -> None:
    # down (the fixture) then finds nothing left; here: SGLang's forks live in the groups pdctl recorded
    pids = group_pids(started_records(deployment["run_dir"]))
    titles = [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids if Path(f"/proc/{p}").exists()]
    assert sum(b"sglang::scheduler" in t for t in titles) == 2, titles


def test_an_idle_sglang_server_on_a_cpu_node_sleeps(deployment: dict) -> None:
    # pdctl renders --sleep-on-idle on CPU nodes: without it an idle scheduler busy-polls a whole core (measured
    # ~100 %; with it ~1 %). The colocated reference is idle until parity's test sends to it.
    server = json.loads((deployment["ref_dir"] / "state.json").read_text())["processes"][0]
    assert b"--sleep-on-idle" in Path(f"/proc/{server['pid']}/cmdline").read_bytes().split(b"\0")
    share = idle_share({str(pid): pid for pid in group_pids([server])}, 5.0)
    assert sum(share.values()) < 0.3, share  # of one core, all of the server's processes together


def _pdctl(deployment: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=deployment["cwd"], capture_output=True,
                          text=True, timeout=900, check=False, env=deployment["env"])


def test_parity_cold_warm_of_the_pd_deployment_against_a_colocated_real_sglang(deployment: dict) -> None:
    # SGLang's own parity kit: PD vs a non-PD server of the same model. TP1 vs TP1 on the same CPU kernels: the
    # greedy tokens must be identical and every comparison within the tolerance (measured: max |Δ| 0), so the
    # noise-floor controls are not needed (--no-control: each would resend the suite); 8 tokens per prompt, each
    # scored (a PD generate costs 0.4-1.9 s here)
    done = _pdctl(deployment, "parity", "--run-dir", str(deployment["run_dir"]), "--reference",
                  deployment["reference"], "--cold", "--warm", "--max-prompt-tokens", "64", "--max-new-tokens", "8",
                  "--no-control", "--deadline", "600", "--json", "-")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["ok"] and set(doc["modes"]) == {"cold", "warm"} and doc["reference"] == deployment["reference"]
    assert doc["tp"]["candidate"] == [1, 1], doc["tp"]
    for name, mode in doc["modes"].items():
        assert mode["compared"] >= 4 and mode["passed"] == mode["compared"], (name, mode["failures"])
        assert mode["statistic"]["summary"]["flips"] == 0 and mode["max_abs_delta"] <= doc["tolerance"], name
    assert max(doc["modes"]["warm"]["cached_tokens"]) > 0  # the warm resend reused the prefix on real SGLang
    assert doc["numerics_notes"] == []  # a Llama: SGLang's own numerics on CPU
    assert "PARITY OK" in done.stderr + done.stdout


def test_bench_serve_through_real_sglang(deployment: dict, sglang_python: str) -> None:
    out = deployment["cwd"] / "bench.json"
    done = _pdctl(deployment, "bench", "serve", "--run-dir", str(deployment["run_dir"]), "--tool-python",
                  sglang_python, "--concurrency", "2", "--isl", "16", "--osl", "8", "--num-prompts", "8", "--warmup",
                  "1", "--work-dir", str(deployment["cwd"] / "bench"), "--json", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[:4000]
    point = json.loads(out.read_text())["points"][0]
    assert (point["requests"], point["completed"], point["errors"]) == (8, 8, 0), point
    assert "sglang.bench_serving 0.5.23" in done.stdout + done.stderr  # SGLang's own benchmark drove it


def _status(deployment: dict) -> tuple[int, dict]:
    done = pdctl("status", "--run-dir", str(deployment["run_dir"]), "--json", "-", cwd=deployment["cwd"],
                 env=deployment["env"], timeout=180)
    return done.returncode, json.loads(done.stdout)


def _record(deployment: dict, name: str) -> dict:
    return next(r for r in started_records(deployment["run_dir"]) if r["name"] == name)


def _eval_cmd(deployment: dict, n: int, results: Path) -> list[str]:
    return [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--run-dir", str(deployment["run_dir"]), "--data-file",
            str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", str(n), "--num-shots", "1", "--max-new-tokens",
            "8", "--parallel", "2", "--results", str(results), "--deadline", "600"]


def _answered(results: Path) -> int:
    return len(results.read_text().splitlines()) if results.exists() else 0


def _serves_again(deployment: dict) -> None:
    """status says healthy and a routed generate (KV over the link) answers."""
    url = deployment["state"]["router"]["url"]

    def serves() -> bool:
        try:
            return _status(deployment)[0] == 0 and len(generate(url, max_new_tokens=2)["output_ids"]) == 2
        except (AssertionError, requests.RequestException):
            return False

    wait_for(serves, timeout=300, what="the real-SGLang deployment to serve again", interval=2)


def test_a_stopped_decode_during_eval_is_named_hung_and_heals_after_sigcont(deployment: dict) -> None:
    # the fault suite's core case on SGLang's own server: its HTTP process stopped mid-eval is named by role,
    # node and pid (process state T) by the watchdog, well before the deadline; SIGCONT heals it
    results = deployment["cwd"] / "stopped-decode.jsonl"
    decode = _record(deployment, "decode-0")
    proc = subprocess.Popen(_eval_cmd(deployment, 30, results), cwd=deployment["cwd"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=deployment["env"])
    try:
        wait_for(lambda: _answered(results) >= 2 or proc.poll() is not None, timeout=300, what="two answers")
        assert proc.poll() is None, proc.communicate()
        os.kill(decode["pid"], signal.SIGSTOP)
        out, err = proc.communicate(timeout=900)
        flat = " ".join((out + err).split())
        assert proc.returncode == 1, flat[-3000:]
        assert f"decode:0 (decode-0, node local, pid {decode['pid']}) is hung" in flat, flat[-3000:]
        assert "process state T (stopped)" in flat and "stopped at its deadline" not in flat
        assert 2 <= _answered(results) < 30
        code, doc = _status(deployment)
        row = next(p for p in doc["processes"] if p["name"] == "decode-0")
        assert code == 1 and row["state"] == "hung", row
    finally:
        os.kill(decode["pid"], signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    _serves_again(deployment)


def test_a_killed_prefill_is_restarted_and_kv_crosses_the_link_again(deployment: dict) -> None:
    prefill = _record(deployment, "prefill-0")
    os.killpg(prefill["pgid"], signal.SIGKILL)  # SGLang's scheduler and detokenizer die with it (one group)
    wait_for(lambda: not live_pids(group_pids([prefill])), timeout=120, what="the killed prefill's group to be gone")
    done = pdctl("restart", "prefill:0", "--run-dir", str(deployment["run_dir"]), "--timeout", "600",
                 cwd=deployment["cwd"], env=deployment["env"], timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "KV crossed prefill-0 -> decode-0" in done.stdout  # a generate over the link, not just /health
    restarted = _record(deployment, "prefill-0")
    assert restarted["pid"] != prefill["pid"]
    assert "sglang::scheduler" in " ".join(_children_titles(int(restarted["pid"])))  # SGLang's own, again
    _serves_again(deployment)


PROMPTS = ("Natalia sold clips to", "The capital of France is", "Janet's ducks lay 16 eggs per day.")


def test_mooncake_tp2_to_tp1_serves_the_colocated_references_tokens(deployment: dict) -> None:
    # the live agreement matrix's serving row (docs/sglang-on-cpu.md): check-compat passes prefill TP2 -> decode
    # TP1 over Mooncake (SGLang's head-sliced transfer), and SGLang's own servers then serve it, each routed
    # greedy generate with exactly the tokens of the colocated TP1 reference. Last in the module: the NIXL pair
    # goes down first (two PD pairs never run at once on these cores); the fixture's down is then a no-op.
    _down(deployment["run_dir"], deployment["cwd"])
    tmp = deployment["cwd"] / "mooncake"
    tmp.mkdir()
    model = yaml.safe_load((deployment["run_dir"] / "topology.yaml").read_text())["model"]["path"]
    doc = _with_free_ports(yaml.safe_load((REPO / "configs" / "local-cpu-sglang-mooncake.yaml").read_text()), model)
    topo = tmp / "mooncake.yaml"
    topo.write_text(yaml.safe_dump(doc))
    verdict = _pdctl(deployment, "check-compat", str(topo), "--json", "-")
    assert verdict.returncode == 0, verdict.stdout[-3000:] + verdict.stderr[-3000:]
    plan = json.loads(verdict.stdout)
    assert plan["ok"] and plan["transfer"]["path"] == "head-slice" and plan["transfer"]["prefill_attn_tp"] == 2
    run_dir = tmp / ".pdctl" / "runs" / doc["name"]
    try:
        done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--skip-preflight",
                               "--timeout", "600"], cwd=tmp, capture_output=True, text=True, timeout=900,
                              check=False, env=deployment["env"])
        assert done.returncode == 0, done.stderr[-4000:]
        state = wait_state(run_dir, "running", 60)
        tps = {p["role"]: requests.get(p["url"] + "/server_info", timeout=30).json()["tp_size"]
               for p in state["processes"]}
        assert tps == {"prefill": 2, "decode": 1}, tps
        for text in PROMPTS:
            routed = generate(state["router"]["url"], text, max_new_tokens=8)["output_ids"]
            plain = generate(deployment["reference"], text, max_new_tokens=8)["output_ids"]
            assert routed == plain and len(routed) == 8, (text, routed, plain)
        backends = {requests.get(p["url"] + "/server_info", timeout=30).json()["disaggregation_transfer_backend"]
                    for p in state["processes"]}
        assert backends == {"mooncake"}, backends
    finally:
        _down(run_dir, tmp)
