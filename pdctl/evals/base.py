"""What an eval is: its dataset, its prompt, its scorer and its defaults — and nothing else.

The rest is shared by every eval: the client over SGLang's APIs (client), the loop with P requests in flight
(runner), the per-item results file and --resume (results), the verdict document (summary), the topology's
`eval.<name>` block (defaults), and the steps from options to verdict (session). Adding an eval is one module
that builds an `Eval` and its entry in pdctl/evals/registry.py (plus its subcommand, docs and tests), as
srtctl's benchmarks/base.py keeps each benchmark to its data, prompt and scorer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Item:
    """One problem. `index` is its position in its source, the key results and --resume use."""

    index: int
    question: str
    answer: str


@dataclass(frozen=True)
class EvalData:
    """What an eval asks (`questions`) and shows as examples (`shots`), and where each came from."""

    questions: list[Item]
    shots: list[Item]
    source: str
    shots_source: str


@dataclass(frozen=True)
class Eval:
    """One eval, as the shared session runs it."""

    name: str  # `pdctl eval NAME`, the topology's eval.NAME block, the results file's stem
    # load(data_file=, shots_file=, num_questions=, num_shots=): the questions and few-shot examples
    load: Callable[..., EvalData]
    prompts: Callable[[EvalData], list[str]]  # one prompt per question, in question order
    stop: tuple[str, ...]  # stop strings sent with each request (the chat API gets none)
    score: Callable[[str, Item], dict[str, Any]]  # a completion's verdict fields: `correct`, and any others
    defaults: Mapping[str, Any]  # built-in num_questions, num_shots, max_new_tokens, parallel, floor
    rates: Mapping[str, str] = field(default_factory=dict)  # more summary rates: key -> the record field counted
    labels: Mapping[str, str] = field(default_factory=dict)  # how the summary table names accuracy and the rates
