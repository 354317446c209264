"""Loading openai/gsm8k through `datasets` from a local cache, offline (the cache is built from shipped data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import DATA

BUILD = """
import json, pathlib, shutil, sys
import datasets
out = pathlib.Path(sys.argv[1])
datasets.load_dataset("json", data_files={"train": sys.argv[2], "test": sys.argv[3]}, cache_dir=str(out / "build"))
built = next((out / "build" / "json").glob("default-*/0.0.0/*/dataset_info.json")).parent
dest = out / "datasets" / "openai___gsm8k" / "main" / "0.0.0" / "0123abcd"
dest.mkdir(parents=True)
for split in ("train", "test"):
    shutil.copy(built / f"json-{split}.arrow", dest / f"gsm8k-{split}.arrow")
info = json.loads((built / "dataset_info.json").read_text())
info.update(config_name="main", dataset_name="gsm8k", builder_name="gsm8k")
for split in info["splits"].values():
    split["dataset_name"] = "gsm8k"
(dest / "dataset_info.json").write_text(json.dumps(info))

from pdctl.evals.gsm8k.data import load_eval_data
d = load_eval_data(data_file=None, shots_file=None, num_questions=7, num_shots=2)
print(json.dumps({"questions": [q.question for q in d.questions], "shots": [s.question for s in d.shots],
                  "source": d.source}))
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(home / "home"), HF_DATASETS_CACHE=str(home / "datasets"), HF_HUB_OFFLINE="1")
    return env


def test_cached_dataset_loads_offline(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # One process: build the cache with `datasets` from the shipped files, then load openai/gsm8k from it.
    out = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path), str(DATA / "gsm8k_train_20.jsonl"),
                          str(DATA / "gsm8k_test_50.jsonl")], env=env, timeout=120, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    test = [json.loads(x)["question"] for x in (DATA / "gsm8k_test_50.jsonl").read_text().splitlines()]
    train = [json.loads(x)["question"] for x in (DATA / "gsm8k_train_20.jsonl").read_text().splitlines()]
    assert doc["questions"] == test[:7]
    assert doc["shots"] == train[:2]  # few-shot examples come from the train split
    assert doc["source"] == "openai/gsm8k main test"


@pytest.mark.timeout(120)
def test_uncached_offline_is_a_clear_user_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--url", "http://127.0.0.1:9", "--num-questions", "2"],
        env=_env(tmp_path), timeout=100, capture_output=True, text=True, cwd=tmp_path, check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "--data-file" in out.stderr and "Traceback" not in out.stderr
