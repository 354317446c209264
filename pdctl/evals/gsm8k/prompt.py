"""The few-shot prompt and stop strings of SGLang's few_shot_gsm8k, so that pdctl's accuracy matches SGLang's.

SGLang builds `"Question: {q}\\nAnswer: {a}\\n\\n"` for each of K shots, then `"Question: {q}\\nAnswer:"`
for the asked question, and stops at "Question" (the model starting the next shot), "Assistant:" and
"<|separator|>". The chat API sends the same text as one user message, as SGLang's run_eval does.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdctl.evals.base import EvalData, Item

#: few_shot_gsm8k's stop strings.
STOP: tuple[str, ...] = ("Question", "Assistant:", "<|separator|>")
SHOT_SEPARATOR = "\n\n"


def question_text(question: str) -> str:
    """One asked question: `Question: {q}\\nAnswer:` (the model continues after the colon)."""
    return f"Question: {question}\nAnswer:"


def shot_text(item: Item) -> str:
    """One worked example: `Question: {q}\\nAnswer: {a}` (the answer ends with `#### N`)."""
    return f"{question_text(item.question)} {item.answer}"


def few_shot_prefix(shots: Sequence[Item]) -> str:
    """The shared prefix: every shot followed by a blank line (empty for zero shots)."""
    return "".join(shot_text(shot) + SHOT_SEPARATOR for shot in shots)


def build_prompt(prefix: str, item: Item) -> str:
    """The full prompt for ITEM given the few-shot PREFIX from `few_shot_prefix`."""
    return prefix + question_text(item.question)


def prompts(data: EvalData) -> list[str]:
    """The prompt of every question of DATA: its few-shot prefix, then the question."""
    prefix = few_shot_prefix(data.shots)
    return [build_prompt(prefix, item) for item in data.questions]
