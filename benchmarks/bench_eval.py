"""`pdctl eval gsm8k` vs lm-eval's `local-completions` on the same server, questions and concurrency.

Why: pdctl's eval replaces lm-eval in a deployment's CI loop, so it must not be slower for the same work. Both
tools run as the user runs them (a CLI process each, start-up included) against one colocated reference
engine started here, on the same GSM8K questions with the same few-shot examples (the first K of the train
file), the same stop strings, max tokens and number of requests in flight. Printed: each wall time, the ratio
lm-eval / pdctl, and each tool's strict / flexible scores (the engine is greedy and deterministic, so both
tools see the same outputs and should agree).

lm-eval runs offline: its gsm8k task is re-declared over local JSON files (`dataset_path: json`), with
`tokenizer_backend=None` so `local-completions` sends text prompts and needs no tokenizer download.
Install it with: pip install "lm-eval[api]==0.4.13"

Environment knobs: BENCH_EVAL_N (questions, default 20), BENCH_EVAL_SHOTS (2), BENCH_EVAL_TOKENS (32),
BENCH_EVAL_PARALLEL (8). Run alone (from the repository root): `python -m benchmarks.bench_eval`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

TASK_YAML = """\
task: gsm8k_pdctl_bench
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
fewshot_config:
  sampler: first_n
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
target_delimiter: " "
fewshot_delimiter: "\\n\\n"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
generation_kwargs:
  until: {stop}
  do_sample: false
  temperature: 0.0
  max_gen_toks: {tokens}
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
"""


def _start_engine(tmp: Path) -> tuple[subprocess.Popen, str, Path]:
    from pdctl.reference.checkpoint import init_checkpoint
    from tests.support.net import free_port, wait_http_ok
    from tests.support.servers import kill_group

    ckpt = init_checkpoint(tmp / "reference-tiny", seed=0)
    port = free_port()
    log = tmp / "engine.log"
    cmd = [sys.executable, "-m", "pdctl.reference", "--model-path", str(ckpt), "--role", "colocated", "--tp", "1",
           "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http_ok(url + "/health", timeout=120.0, proc=proc, interval=0.3)
    except Exception:
        kill_group(proc, timeout=15)
        print(log.read_text()[-2000:])
        raise
    return proc, url, log


def _timed(cmd: list[str], timeout: float, env: dict[str, str], flush: str) -> tuple[float, subprocess.CompletedProcess]:
    import requests

    requests.post(flush + "/flush_cache", timeout=30)
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False)
    return time.monotonic() - start, out


def _lm_eval_scores(out_dir: Path) -> dict[str, float]:
    results = sorted(out_dir.rglob("results_*.json"))
    if not results:
        return {}
    doc = json.loads(results[-1].read_text())["results"]["gsm8k_pdctl_bench"]
    return {"strict": doc.get("exact_match,strict-match"), "flexible": doc.get("exact_match,flexible-extract")}


def main() -> int:
    """Run both tools once each on one engine; print wall times and the ratio. 0 = ran (or skipped)."""
    from pdctl.evals.gsm8k.prompt import STOP  # the stop strings pdctl sends: lm-eval gets the same ones
    from tests.support.servers import kill_group

    try:
        import lm_eval  # noqa: F401
    except ImportError:
        print('SKIP bench_eval: lm-eval is not installed (pip install "lm-eval[api]==0.4.13")')
        return 0
    n = int(os.environ.get("BENCH_EVAL_N", "20"))
    shots = int(os.environ.get("BENCH_EVAL_SHOTS", "2"))
    tokens = int(os.environ.get("BENCH_EVAL_TOKENS", "32"))
    parallel = int(os.environ.get("BENCH_EVAL_PARALLEL", "8"))
    test, train = DATA / "gsm8k_test_50.jsonl", DATA / "gsm8k_train_20.jsonl"
    print(f"bench_eval: {n} questions, {shots} shots, max {tokens} new tokens, {parallel} in flight, "
          "colocated reference engine, /v1/completions for both")

    with tempfile.TemporaryDirectory(prefix="bench_eval_") as tmp_name:
        tmp = Path(tmp_name)
        tasks = tmp / "tasks"
        tasks.mkdir()
        (tasks / "gsm8k_pdctl_bench.yaml").write_text(
            TASK_YAML.format(train=train, test=test, stop=json.dumps(list(STOP)), tokens=tokens))
        proc, url, _ = _start_engine(tmp)
        try:
            pdctl_cmd = [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--url", url, "--api", "completion",
                         "--data-file", str(test), "--shots-file", str(train), "--num-questions", str(n),
                         "--num-shots", str(shots), "--max-new-tokens", str(tokens), "--parallel", str(parallel),
                         "--max-errors", "-1", "--json", str(tmp / "pdctl.json")]
            lm_cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--tasks",
                      "gsm8k_pdctl_bench", "--include_path", str(tasks), "--num_fewshot", str(shots),
                      "--limit", str(n), "--output_path", str(tmp / "lm_eval_out"),
                      "--model_args", (
                          f"base_url={url}/v1/completions,model=reference-tiny,num_concurrent={parallel},"
                          "max_retries=3,tokenized_requests=False,tokenizer_backend=None")]
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
            # The prefix cache is flushed before every run, so that no tool profits from another's prompts;
            # pdctl runs before and after lm-eval and its mean is taken (the engine has nothing to warm up).
            t_pd1, out_pd = _timed(pdctl_cmd, 900, env, flush=url)
            if out_pd.returncode not in (0, 1):
                print(f"pdctl eval failed ({out_pd.returncode}):\n{out_pd.stderr[-2000:]}")
                return 1
            t_lm, out_lm = _timed(lm_cmd, 900, env, flush=url)
            if out_lm.returncode != 0:
                print(f"lm-eval failed ({out_lm.returncode}):\n{out_lm.stderr[-3000:]}")
                return 1
            t_pd2, out_pd = _timed(pdctl_cmd, 900, env, flush=url)
        finally:
            kill_group(proc, timeout=15)
        t_pd = (t_pd1 + t_pd2) / 2
        ours = json.loads((tmp / "pdctl.json").read_text())
        theirs = _lm_eval_scores(tmp / "lm_eval_out")
    print(f"pdctl eval gsm8k : {t_pd:7.2f} s wall (runs {t_pd1:.2f}, {t_pd2:.2f}; in-loop {ours['latency_s']:.2f} s)"
          f"  strict {ours['strict_accuracy']:.3f} flexible {ours['flexible_accuracy']:.3f}"
          f"  errors {ours['errors']}")
    print(f"lm-eval local-completions: {t_lm:7.2f} s wall"
          f"  strict {theirs.get('strict', float('nan')):.3f} flexible {theirs.get('flexible', float('nan')):.3f}")
    print(f"wall-time ratio lm-eval / pdctl = {t_lm / t_pd:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
