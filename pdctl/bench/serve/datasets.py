"""Where a sweep's prompts come from, in the form the load generator reads.

- `random`: random token ids (the tool's `random-ids` dataset), each prompt exactly `isl` tokens.
- `gsm8k`: the GSM8K test questions shipped with pdctl (data/gsm8k_test_50.jsonl, MIT, from
  openai/grade-school-math), and
- a path to a ShareGPT-style JSONL file given by the user (`{"conversations": [{"from": "human", "value": ...},
  ...]}`, or OpenAI-style `{"messages": [{"role", "content"}]}`, or `{"text"|"prompt"|"question": ...}`):
  real text, tokenized by the tool and cut or repeated to exactly `isl` tokens per prompt (the tool's `random`
  dataset over that text, as SGLang samples ShareGPT), so that every point's lengths are what the table says.

The tool reads ShareGPT JSON (one list); user files are JSONL, so they are converted into the run's work dir.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import iter_jsonl

GSM8K_FILE = Path(__file__).parent / "data" / "gsm8k_test_50.jsonl"


@dataclass(frozen=True)
class Dataset:
    """What the tool is told: its dataset name and, for real text, the ShareGPT JSON file it samples from."""

    name: str  # "random" | "gsm8k" | the user's path
    tool_dataset: str  # the tool's --dataset-name
    path: Path | None  # the tool's --dataset-path
    prompts: int  # how many distinct texts (0 for random ids)


def _text_of(doc: Any) -> str | None:
    """The first user turn of one JSONL record, in any of the accepted shapes."""
    if not isinstance(doc, dict):
        return None
    turns = doc.get("conversations") or doc.get("conversation") or doc.get("messages")
    if isinstance(turns, list) and turns and isinstance(turns[0], dict):
        value = turns[0].get("value", turns[0].get("content"))
        return value if isinstance(value, str) else None
    for key in ("text", "prompt", "question"):
        if isinstance(doc.get(key), str):
            return doc[key]
    return None


def read_prompts(path: Path, what: str) -> list[str]:
    """The non-empty prompt texts of a JSONL file; UserError naming the line of a record with none."""
    texts: list[str] = []
    for lineno, doc in iter_jsonl(path, what):
        text = _text_of(doc)
        if text is None:
            raise UserError(f"{path}:{lineno}: expected a ShareGPT-style record ({{\"conversations\": [{{\"from\": "
                            "\"human\", \"value\": ...}]}}) or one with a \"text\"/\"prompt\"/\"question\" string")
        if text.strip():
            texts.append(text)
    if not texts:
        raise UserError(f"{path}: no prompts in it")
    return texts


def prepare(name: str, work_dir: Path, records: int = 1) -> Dataset:
    """The dataset NAME ("random", "gsm8k" or a JSONL path) ready for the tool; files go to WORK_DIR.

    The tool sends at most one request per record of a text dataset, so the texts are repeated (in order)
    until there are at least RECORDS records: a point never silently sends fewer requests than asked."""
    if name == "random":
        return Dataset(name, "random-ids", None, 0)
    if name == "gsm8k":
        source, what = GSM8K_FILE, "GSM8K prompts"
    else:
        source, what = Path(name), "--dataset file"
        if not source.is_file():
            raise UserError(f"--dataset {name}: not 'random', 'gsm8k' or an existing JSONL file")
    texts = read_prompts(source, what)
    # The tool keeps records with two turns and samples the first one's tokens.
    cycled = [texts[i % len(texts)] for i in range(max(records, len(texts)))]
    doc = [{"conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": ""}]} for t in cycled]
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / "sharegpt.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return Dataset(name, "random", out, len(texts))
