"""GSM8K accuracy of a deployment, with SGLang's few_shot_gsm8k methodology (`pdctl eval gsm8k`).

The eval is its data (`data`: GSM8K items from `datasets` or a JSONL file, few-shot examples), its prompt
(`prompt`: few_shot_gsm8k's text and stop strings) and its scorer (`scoring`: SGLang's rule plus lm-eval's
strict / flexible extraction); everything else is pdctl.evals' shared client, runner, results and summary.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pdctl.evals.base import Eval, Item
from pdctl.evals.gsm8k.data import load_eval_data
from pdctl.evals.gsm8k.prompt import STOP, prompts
from pdctl.evals.gsm8k.scoring import score

# SGLang's few_shot_gsm8k defaults: 200 questions, 5 shots, 512 new tokens, 128 in flight; no floor
DEFAULTS: dict[str, Any] = {"num_questions": 200, "num_shots": 5, "max_new_tokens": 512, "parallel": 128,
                            "floor": None}


def _score(output: str, item: Item) -> dict[str, Any]:
    return asdict(score(output, item.answer))


GSM8K = Eval(
    name="gsm8k", load=load_eval_data, prompts=prompts, stop=STOP, score=_score, defaults=DEFAULTS,
    rates={"strict_accuracy": "strict_correct", "flexible_accuracy": "flexible_correct", "invalid": "invalid"},
    labels={"accuracy": "accuracy (SGLang)", "strict_accuracy": "strict_accuracy (lm-eval)",
            "flexible_accuracy": "flexible_accuracy (lm-eval)", "invalid": "invalid"},
)
