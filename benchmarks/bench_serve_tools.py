"""Which load generator `pdctl bench serve` runs: SGLang's bench_serving, aiperf, guidellm, genai-perf and
inference-perf measured side by side on this machine (docs/bench-serve.md records the numbers).

For each tool, installed into its own scratch venv (SGLang's from `make sglang-env`):
1. install: seconds, footprint (MB, packages), and what installing it into pdctl's .venv would change
   (`pip install --dry-run --report`: packages pdctl pins — torch CPU, pydantic, ... — it would up/downgrade);
2. client overhead: requests/s it drives against a trivial local streaming server (benchmarks/serve_tools/
   trivial_server.py, no model, loopback) and the client CPU seconds it burns for them;
3. accuracy: against the same server made a timing oracle (TTFT 50 ms, ITL 10 ms, server-side timestamps
   of every token), the tool's TTFT/ITL/E2E medians against the server's;
4. fit: does it run against pdctl's reference engine's streaming API directly and through the real
   sglang-router (PD), with output token counts equal to what was asked.

Run: `python -m benchmarks.bench_serve_tools` (or `make bench`; knobs: BENCH_TOOLS=sglang,aiperf,...,
BENCH_TOOLS_DIR=/tmp/pdctl-bench-tools, BENCH_TOOLS_N=1000 requests for the overhead run,
BENCH_TOOLS_PHASES=overhead,accuracy,fit, BENCH_TOOLS_CONFLICTS=0 to skip the dry-run installs). A tool that cannot
be installed or run is reported as such, with the reason; the others still run.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS_DIR = Path(os.environ.get("BENCH_TOOLS_DIR", "/tmp/pdctl-bench-tools"))
PINS = {"aiperf": "aiperf==0.13.0", "guidellm": "guidellm==0.8.1", "genai-perf": "genai-perf==0.0.16",
        "inference-perf": "inference-perf==0.7.0", "sglang": "sglang==0.5.23"}
N_OVERHEAD = int(os.environ.get("BENCH_TOOLS_N", "1000"))


def _sglang_python() -> str:
    return os.environ.get("PDCTL_SGLANG_PYTHON") or str(ROOT / ".venv-sglang" / "bin" / "python")


def install(tool: str) -> dict:
    """The tool's venv (made if missing): {"ok", "secs", "mb", "packages", "error"}."""
    if tool == "sglang":
        py = Path(_sglang_python())
        venv = py.parents[1]
        info = {"ok": py.exists(), "secs": None, "venv": str(venv), "error": None if py.exists() else
                "no SGLang side env: make sglang-env"}
    else:
        venv = TOOLS_DIR / tool
        info = {"venv": str(venv), "secs": None, "error": None}
        if not (venv / ".installed").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            start = time.monotonic()
            done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", PINS[tool]], capture_output=True,
                                  text=True, check=False)
            info["secs"] = round(time.monotonic() - start)
            if done.returncode != 0:
                err = [ln for ln in done.stderr.splitlines() if ln.startswith("ERROR")]
                (venv / ".failed").write_text("\n".join(err[:2]) or done.stderr[-300:])
            else:
                (venv / ".installed").write_text(str(info["secs"]))
        if (venv / ".installed").exists():
            info["secs"] = info["secs"] or int((venv / ".installed").read_text() or 0)
        info["ok"] = (venv / ".installed").exists()
        if not info["ok"]:
            info["error"] = (venv / ".failed").read_text() if (venv / ".failed").exists() else "install failed"
    if info["ok"]:
        du = subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True, check=False).stdout.split()
        info["mb"] = int(du[0]) if du else None
        listing = subprocess.run([str(venv / "bin" / "pip"), "list", "--format", "json"], capture_output=True,
                                 text=True, check=False).stdout
        info["packages"] = len(json.loads(listing or "[]"))
    return info


def conflicts(tool: str) -> list[str]:
    """What installing TOOL into pdctl's own .venv would change among the packages already there."""
    pip = ROOT / ".venv" / "bin" / "pip"
    have = {p["name"].lower(): p["version"] for p in json.loads(subprocess.run(
        [str(pip), "list", "--format", "json"], capture_output=True, text=True, check=False).stdout or "[]")}
    done = subprocess.run([str(pip), "install", "--dry-run", "--quiet", "--report", "-", PINS[tool]],
                          capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        return [f"cannot resolve: {(done.stderr.strip().splitlines() or ['?'])[-1][:200]}"]
    changes = []
    for item in json.loads(done.stdout).get("install", []):
        meta = item.get("metadata", {})
        name, version = meta.get("name", "?").lower(), meta.get("version", "?")
        if name in have and have[name] != version:
            changes.append(f"{name} {have[name]} -> {version}")
        elif name.startswith("nvidia-"):
            changes.append(f"+{name}")
    return changes


@contextmanager
def trivial_server(ttft_ms: float = 0, itl_ms: float = 0):
    """The trivial streaming server in its own process; yields (url, log path)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-tools-"))
    port_file, log = tmp / "port", tmp / "server.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.serve_tools.trivial_server", "--port-file",
                             str(port_file), "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--log", str(log)],
                            cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("trivial server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _command(tool: str, url: str, api: str, tok: str, n: int, conc: int, isl: int, osl: int, out: Path) -> list[str]:
    venv = Path(install(tool)["venv"]) if tool != "sglang" else None
    if tool == "sglang":
        backend = {"generate": "sglang", "completions": "sglang-oai"}[api]
        return [_sglang_python(), "-m", "sglang.bench_serving", "--backend", backend, "--base-url", url,
                "--tokenizer", tok, "--dataset-name", "random-ids", "--random-input-len", str(isl),
                "--random-output-len", str(osl), "--random-range-ratio", "1", "--num-prompts", str(n),
                "--max-concurrency", str(conc), "--warmup-requests", "1", "--output-file", str(out / "out.jsonl"),
                "--output-details", "--disable-tqdm", *(["--tokenize-prompt"] if api == "generate" else [])]
    if tool == "aiperf":
        return [str(venv / "bin" / "aiperf"), "profile", "--model", "m", "--tokenizer", tok, "--url", url,
                "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc), "--request-count",
                str(n), "--synthetic-input-tokens-mean", str(isl), "--synthetic-input-tokens-stddev", "0",
                "--output-tokens-mean", str(osl), "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
                "--random-seed", "1", "--artifact-dir", str(out), "--ui-type", "none", "--no-server-metrics",
                "--no-gpu-telemetry", "--num-warmup-requests", "1"]
    if tool == "guidellm":
        return [str(venv / "bin" / "guidellm"), "run", "--backend",
                f"kind=openai_http,target={url},request_format=/v1/completions", "--profile",
                f"kind=concurrent,streams={conc}", "--constraint", f"kind=max_requests,count={n}", "--data",
                f"kind=synthetic_text,prompt_tokens={isl},output_tokens={osl}", "--tokenizer",
                f"kind=hf_auto,model={tok}", "--output", f"kind=json,path={out / 'out.json'}", "--disable-progress"]
    if tool == "genai-perf":
        return [str(venv / "bin" / "genai-perf"), "profile", "-m", "m", "--tokenizer", tok, "--url", url,
                "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc), "--request-count",
                str(n), "--synthetic-input-tokens-mean", str(isl), "--synthetic-input-tokens-stddev", "0",
                "--output-tokens-mean", str(osl), "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(out)]
    raise ValueError(tool)


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def parse(tool: str, out: Path) -> dict:
    """{"req_s", "completed", "out_tokens", "ttft_ms", "itl_ms", "e2e_ms"} (medians) from the tool's output."""
    if tool == "sglang":
        d = json.loads((out / "out.jsonl").read_text().splitlines()[-1])
        return {"req_s": d["request_throughput"], "completed": d["completed"], "out_tokens": d["total_output_tokens"],
                "ttft_ms": d["median_ttft_ms"], "itl_ms": d["median_itl_ms"], "e2e_ms": d["median_e2e_latency_ms"]}
    if tool == "aiperf":
        d = json.loads((out / "profile_export_aiperf.json").read_text())

        def get(name: str, stat: str = "p50"):
            return (d.get(name) or {}).get(stat)

        return {"req_s": get("request_throughput", "avg"), "completed": get("request_count", "avg"),
                "out_tokens": (get("output_sequence_length", "avg") or 0) * (get("request_count", "avg") or 0),
                "ttft_ms": get("time_to_first_token"), "itl_ms": get("inter_token_latency"),
                "e2e_ms": get("request_latency")}
    if tool == "guidellm":
        b = json.loads((out / "out.json").read_text())["benchmarks"][0]["metrics"]

        def med(name: str):
            return b[name]["successful"]["median"]

        return {"req_s": b["requests_per_second"]["successful"]["mean"],
                "completed": b["request_totals"]["successful"], "out_tokens": b["output_token_count"]["successful"]
                ["total_sum"], "ttft_ms": med("time_to_first_token_ms"), "itl_ms": med("inter_token_latency_ms"),
                "e2e_ms": med("request_latency") * 1000}
    raise ValueError(tool)


def run_tool(tool: str, url: str, api: str, tok: str, n: int, conc: int, isl: int, osl: int) -> dict:
    """Run once; {"ok", "wall_s", "cpu_s", ...parse()} or {"ok": False, "error"}."""
    out = Path(tempfile.mkdtemp(prefix=f"bench-{tool}-"))
    cmd = _command(tool, url, api, tok, n, conc, isl, osl, out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if tool == "aiperf":  # measured: with HF_HUB_OFFLINE=1 aiperf 0.13 takes a local tokenizer dir for a repo id
        env = {k: v for k, v in env.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env, cwd=out)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "timed out after 900 s"}
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        res = parse(tool, out)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"ok": False, "error": f"exit {done.returncode}, no result ({exc!r}): {' | '.join(tail)[:400]}"}
    return {"ok": True, "wall_s": wall, "cpu_s": cpu, **res}


def server_truth(log: Path, n: int) -> dict | None:
    """Medians of TTFT, ITL and E2E as the timing-oracle server measured them, over the last N requests (the
    measured ones: warm-up requests come first); None when the server saw none."""
    rows = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()][-n:] if log.exists() else []
    if not rows:
        return None
    ttft = [(r["token_times"][0] - r["received"]) * 1000 for r in rows]
    itl = [(b - a) * 1000 for r in rows for a, b in zip(r["token_times"], r["token_times"][1:])]
    e2e = [(r["token_times"][-1] - r["received"]) * 1000 for r in rows]
    return {"ttft_ms": statistics.median(ttft), "itl_ms": statistics.median(itl), "e2e_ms": statistics.median(e2e),
            "prompt_tokens": sorted({r["prompt_tokens"] for r in rows}), "requests": len(rows)}


def fit_reference(tools: list[str], tok: str) -> dict:
    """Each tool against the reference engine directly (colocated) and through the real router (PD TP1->TP1)."""
    sys.path.insert(0, str(ROOT))
    from pdctl.reference.checkpoint import init_checkpoint
    from tests.support.pd import start_pd
    from tests.support.servers import start_reference_server

    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = init_checkpoint(Path(tmp) / "ckpt", seed=0)
        with start_reference_server(ckpt) as direct, start_pd(ckpt, prefill_tp=1, decode_tp=1) as pd:
            for where, url in (("direct", direct.url), ("router", pd.router_url)):
                for tool in tools:
                    for api in (("generate", "completions") if tool == "sglang" else ("completions",)):
                        r = run_tool(tool, url, api, tok, n=8, conc=2, isl=32, osl=8)
                        exact = r.get("ok") and r["completed"] == 8 and round(r["out_tokens"]) == 64
                        results[f"{tool}/{api}/{where}"] = {**r, "counts_exact": bool(exact)}
    return results


def main() -> int:
    from pdctl.bench.serve.tokenizer import write_byte_tokenizer

    tools = os.environ.get("BENCH_TOOLS", "sglang,aiperf,guidellm,genai-perf,inference-perf").split(",")
    phases = os.environ.get("BENCH_TOOLS_PHASES", "overhead,accuracy,fit").split(",")
    tok = str(write_byte_tokenizer(Path(tempfile.mkdtemp(prefix="bench-tok-")) / "tok"))
    report: dict = {"install": {}, "overhead": {}, "accuracy": {}, "fit": {}}
    runnable = []
    for tool in tools:
        info = install(tool)
        if info["ok"] and os.environ.get("BENCH_TOOLS_CONFLICTS", "1") == "1":
            info["changes_in_pdctl_venv"] = conflicts(tool)
        report["install"][tool] = info
        print(f"install {tool}: {json.dumps(info)}", flush=True)
        if info["ok"]:
            runnable.append(tool)
    with trivial_server() as (url, _log):
        for tool in runnable if "overhead" in phases else []:
            r = run_tool(tool, url, "completions", tok, n=N_OVERHEAD, conc=32, isl=32, osl=8)
            report["overhead"][tool] = r
            print(f"overhead {tool}: {json.dumps(r)}", flush=True)
    for tool in runnable if "accuracy" in phases else []:
        for api in ("generate", "completions") if tool == "sglang" else ("completions",):
            with trivial_server(ttft_ms=50, itl_ms=10) as (url, log):
                r = run_tool(tool, url, api, tok, n=32, conc=4, isl=32, osl=16)
                report["accuracy"][f"{tool}/{api}"] = {"tool": r, "server": server_truth(log, 32)}
            print(f"accuracy {tool}/{api}: {json.dumps(report['accuracy'][f'{tool}/{api}'])}", flush=True)
    if "fit" in phases:
        report["fit"] = fit_reference(runnable, tok)
    for key, r in report["fit"].items():
        print(f"fit {key}: ok={r.get('ok')} counts_exact={r['counts_exact']} {r.get('error', '')}", flush=True)
    out = Path(os.environ.get("BENCH_TOOLS_REPORT", "/tmp/pdctl-bench-serve-tools.json"))
    out.write_text(json.dumps(report, indent=1))
    print(f"\nsummary (requests/s the tool drove against the trivial server, client CPU s for {N_OVERHEAD}):")
    for tool in tools:
        r = report["overhead"].get(tool) or {}
        why = report["install"][tool].get("error") or r.get("error") or "not run"
        line = f"{r['req_s']:8.1f} req/s  cpu {r['cpu_s']:6.1f} s  wall {r['wall_s']:6.1f} s" if r.get("ok") else why
        print(f"  {tool:15s} {line}")
    print(f"(full report: {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
